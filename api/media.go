package api

import (
	"strconv"
	"strings"
)

// The media types /graphql answers queries and mutations in (GraphQL over
// HTTP, "Media Types"): the spec's preferred one, whose status codes say
// what happened to the request, and the legacy one, which is 200 for every
// well-formed request.
const (
	mediaGraphQLResponse = "application/graphql-response+json"
	mediaJSON            = "application/json"
)

// responseMediaType is the media type to answer a request with Accept
// header accept in, by RFC 9110's content negotiation: the one of the two
// with the higher q-value, each taking the q of the most specific range
// that matches it (a q of 0 refuses it); between equal q-values the one
// named before the other, and application/json when only a wildcard names
// them. No Accept header is application/json: the spec's legacy rule, which
// graphql-http's audit checks. ok is false when the header parses but
// accepts neither (the caller answers 406). Parameters other than q are
// ignored: both are UTF-8 always.
//
// The headers clients send (none, */*, one of the two) are decided without
// parsing: this runs for every GraphQL request.
func responseMediaType(accept string) (mediaType string, ok bool) {
	switch accept {
	case "", "*/*", mediaJSON:
		return mediaJSON, true
	case mediaGraphQLResponse:
		return mediaGraphQLResponse, true
	}
	gr, js := acceptance{}, acceptance{}
	parsed := false
	i := -1
	for part := range strings.SplitSeq(accept, ",") {
		if i++; i == maxAcceptRanges {
			break
		}
		rng, q, valid := parseMediaRange(part)
		if !valid {
			continue
		}
		parsed = true
		gr.consider(rng, mediaGraphQLResponse, q, i)
		js.consider(rng, mediaJSON, q, i)
	}
	switch {
	case !parsed:
		return mediaJSON, true // nothing readable: as if there were no Accept header
	case gr.q == 0 && js.q == 0:
		return "", false
	case gr.q != js.q:
		if gr.q > js.q {
			return mediaGraphQLResponse, true
		}
		return mediaJSON, true
	case gr.specificity == 2 && (js.specificity < 2 || gr.position < js.position):
		return mediaGraphQLResponse, true
	default:
		return mediaJSON, true
	}
}

// maxAcceptRanges is how many elements of an Accept header are read: a
// browser's has about five, and net/http admits a header of up to 1 MB,
// whose ~200,000 elements would otherwise each be split and lower-cased
// (twice a request: the answer cache and the transport both negotiate).
// Ranges after it are ignored.
const maxAcceptRanges = 32

// maxMediaRangeBytes is the longest media range read (RFC 6838: a type and
// a subtype of at most 127 characters each); a longer one is no media range.
const maxMediaRangeBytes = 255

// acceptance is what an Accept header says of one media type: the q of the
// most specific range matching it (specificity 2 the type itself, 1
// application/*, 0 */*) and where that range is in the header; q is 0 when
// no range matches it.
type acceptance struct {
	q           float64
	specificity int
	position    int
	matched     bool
}

func (a *acceptance) consider(rng string, mediaType string, q float64, position int) {
	specificity := -1
	switch rng {
	case mediaType:
		specificity = 2
	case "application/*":
		specificity = 1
	case "*/*":
		specificity = 0
	}
	if specificity < 0 || (a.matched && specificity <= a.specificity) {
		return
	}
	*a = acceptance{q: q, specificity: specificity, position: position, matched: true}
}

// parseMediaRange reads one element of an Accept header: its media range,
// lower-cased, and its q-value (1 if absent). valid is false for what is no
// media range (no "/", or a q that is not a number in [0, 1]).
func parseMediaRange(part string) (rng string, q float64, valid bool) {
	rng, params, _ := strings.Cut(part, ";")
	if rng = strings.TrimSpace(rng); len(rng) > maxMediaRangeBytes {
		return "", 0, false
	}
	rng = strings.ToLower(rng)
	if typ, sub, found := strings.Cut(rng, "/"); !found || typ == "" || sub == "" || (typ == "*" && sub != "*") {
		return "", 0, false
	}
	q = 1
	if params == "" {
		return rng, q, true
	}
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || !(v >= 0 && v <= 1) { // NaN too
			return "", 0, false
		}
		q = v
	}
	return rng, q, true
}
