package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// gqlClient posts GraphQL documents to the server over one keep-alive
// transport shared by every load client, as a fleet of browsers behind one
// proxy would: connections are reused, never re-dialled per request.
type gqlClient struct {
	url  string
	http *http.Client
}

func newGQLClient(baseURL string, maxConns int) *gqlClient {
	tr := &http.Transport{
		MaxIdleConns:        maxConns * 2,
		MaxIdleConnsPerHost: maxConns * 2,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &gqlClient{url: baseURL + "/graphql", http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// post sends a prepared JSON body and appends the response body to buf[:0],
// returning it. Reusing buf keeps the load generator from allocating per
// request on a machine whose cores it shares with the server.
func (g *gqlClient) post(ctx context.Context, body []byte, bearer string, buf []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		return buf, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return g.send(req, buf)
}

// get sends GET /graphql?rawQuery anonymously (a persisted query, as a
// browser behind a CDN sends it) and appends the answer to buf[:0].
func (g *gqlClient) get(ctx context.Context, rawQuery string, buf []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"?"+rawQuery, nil)
	if err != nil {
		return buf, fmt.Errorf("build request: %w", err)
	}
	return g.send(req, buf)
}

// send does req and appends the response body to buf[:0]; an answer other
// than 200 is an error carrying the body's start.
func (g *gqlClient) send(req *http.Request, buf []byte) ([]byte, error) {
	resp, err := g.http.Do(req)
	if err != nil {
		return buf, fmt.Errorf("%s: %w", req.Method, err)
	}
	defer resp.Body.Close()
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return buf, fmt.Errorf("read response: %w", err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return buf, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, buf)
	}
	return buf, nil
}

var (
	errorsKey      = []byte(`"errors":`)
	userErrorsNone = []byte(`"userErrors":[]`)
)

// mutationOK reports whether a mutation response carries neither GraphQL
// errors nor userErrors.
func mutationOK(resp []byte) error {
	if bytes.Contains(resp, errorsKey) || !bytes.Contains(resp, userErrorsNone) {
		return fmt.Errorf("mutation refused: %.300s", resp)
	}
	return nil
}

// do runs one document with variables for setup and checks, where
// convenience matters more than allocations, and decodes data into out.
func (g *gqlClient) do(ctx context.Context, bearer, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	resp, err := g.post(ctx, body, bearer, nil)
	if err != nil {
		return err
	}
	var r struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("decode response %.200s: %w", resp, err)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("graphql: %s", r.Errors[0].Message)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return fmt.Errorf("decode data: %w", err)
		}
	}
	return nil
}

// jsonString extracts the string value that follows key (e.g. `"id":"`)
// without decoding the whole response.
func jsonString(resp []byte, key []byte) ([]byte, bool) {
	i := bytes.Index(resp, key)
	if i < 0 {
		return nil, false
	}
	rest := resp[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, false
	}
	return rest[:j], true
}
