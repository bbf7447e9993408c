package api

import (
	"container/list"
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// parsedBytesPerQueryByte is what a parsed and validated document costs in
// memory per byte of its text, for storefront and dashboard queries (an
// AST node and its position per token): the parsed-document cache counts
// each entry as this many times its text.
const parsedBytesPerQueryByte = 24

// persistedQueryCacheBytes bounds the texts that automatic persisted queries
// remember per instance (hash plus text, each at most
// maxPersistedQueryBytes).
const persistedQueryCacheBytes = 8 << 20

// byteLRU is a least-recently-used cache bounded by the bytes its entries
// cost, not by their number: a hostile client's documents are large, and a
// cache of 1000 entries of up to a megabyte each is a gigabyte. An entry
// larger than a sixteenth of the budget is not kept at all, so one client
// cannot flush everyone's queries with a few big ones.
type byteLRU[T any] struct {
	mu         sync.Mutex
	max        int64
	maxEntries int // 0: no bound but max
	used       int64
	order      *list.List // front: most recently used; values *lruEntry[T]
	items      map[string]*list.Element
	cost       func(key string, v T) int64
}

type lruEntry[T any] struct {
	key  string
	v    T
	cost int64
}

func newByteLRU[T any](maxBytes int64, cost func(string, T) int64) *byteLRU[T] {
	return &byteLRU[T]{max: maxBytes, order: list.New(), items: map[string]*list.Element{}, cost: cost}
}

func (c *byteLRU[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[T]).v, true
	}
	var zero T
	return zero, false
}

// add keeps v under key unless key is there already (a parsed document
// or a persisted text is the same whoever adds it).
func (c *byteLRU[T]) add(key string, v T) { c.store(key, v, false) }

// put keeps v under key, replacing what was there (an answer that changed).
func (c *byteLRU[T]) put(key string, v T) { c.store(key, v, true) }

func (c *byteLRU[T]) store(key string, v T, replace bool) {
	cost := c.cost(key, v)
	if cost > c.max/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		if !replace {
			return
		}
		en := e.Value.(*lruEntry[T])
		c.used += cost - en.cost
		en.v, en.cost = v, cost
	} else {
		c.items[key] = c.order.PushFront(&lruEntry[T]{key: key, v: v, cost: cost})
		c.used += cost
	}
	for c.used > c.max || (c.maxEntries > 0 && c.order.Len() > c.maxEntries) {
		oldest := c.order.Back()
		en := oldest.Value.(*lruEntry[T])
		c.order.Remove(oldest)
		delete(c.items, en.key)
		c.used -= en.cost
	}
}

// bytes is what the entries cost now.
func (c *byteLRU[T]) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// documentCache is gqlgen's parsed-query cache and the APQ text cache, both
// bounded in bytes, which keep only what was accepted: gqlgen adds a
// document to its query cache as soon as it validates, and an APQ text as
// soon as its hash matches, both before the cost check. Their Add does
// nothing here; acceptDocuments, an extension that runs after the
// complexity limit, adds what passed. So a document refused for parsing,
// validation or cost is never kept.
type documentCache struct {
	parsed    *byteLRU[*ast.QueryDocument]
	persisted *byteLRU[string]
}

func newDocumentCache(parsedBytes int64) *documentCache {
	return &documentCache{
		parsed: newByteLRU(parsedBytes, func(query string, _ *ast.QueryDocument) int64 {
			return int64(len(query)) * (1 + parsedBytesPerQueryByte)
		}),
		persisted: newByteLRU(persistedQueryCacheBytes, func(hash, query string) int64 { return int64(len(hash) + len(query)) }),
	}
}

// queries is the graphql.Cache for handler.SetQueryCache.
func (d *documentCache) queries() graphql.Cache[*ast.QueryDocument] { return parsedCache{d} }

// texts is the graphql.Cache for extension.AutomaticPersistedQuery.
func (d *documentCache) texts() graphql.Cache[string] { return persistedCache{d} }

type parsedCache struct{ d *documentCache }

func (c parsedCache) Get(_ context.Context, query string) (*ast.QueryDocument, bool) {
	return c.d.parsed.get(query)
}
func (parsedCache) Add(context.Context, string, *ast.QueryDocument) {}

type persistedCache struct{ d *documentCache }

func (c persistedCache) Get(_ context.Context, hash string) (string, bool) {
	return c.d.persisted.get(hash)
}
func (persistedCache) Add(context.Context, string, string) {}

// acceptDocuments is the handler extension that fills the documentCache; it
// must be added after the complexity limit (extensions mutate the
// operation context in the order they were added).
type acceptDocuments struct{ d *documentCache }

var (
	_ graphql.HandlerExtension        = acceptDocuments{}
	_ graphql.OperationContextMutator = acceptDocuments{}
)

func (acceptDocuments) ExtensionName() string                   { return "AcceptDocuments" }
func (acceptDocuments) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext runs once the document parsed, validated and passed
// the cost check: it is kept, and so is its APQ text if one came with it.
func (a acceptDocuments) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	a.d.parsed.add(opCtx.RawQuery, opCtx.Doc)
	if stats, ok := opCtx.Stats.GetExtension("APQ").(*extension.ApqStats); ok && stats.SentQuery && persistable(opCtx.Doc, opCtx.RawQuery) {
		a.d.persisted.add(stats.Hash, opCtx.RawQuery)
	}
	return nil
}

// persistable says whether automatic persisted queries may remember a text:
// not when it is larger than maxPersistedQueryBytes, and not when it holds a
// mutation. The rate limiter tells a mutation (write budget) from a query by
// the text the request carries, and a hash-only request carries none; so a
// mutation's client is told PersistedQueryNotFound and sends the text every
// time (Apollo's link does so by itself).
func persistable(doc *ast.QueryDocument, query string) bool {
	if len(query) > maxPersistedQueryBytes {
		return false
	}
	for _, op := range doc.Operations {
		if op.Operation == ast.Mutation {
			return false
		}
	}
	return true
}
