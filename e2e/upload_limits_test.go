package e2e

import (
	"bufio"
	"bytes"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httputil"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// zeros is an endless upload that allocates nothing and counts what was
// taken from it, so a test can send "64 MiB" without holding 64 MiB.
type zeros struct {
	left int64
	sent *atomic.Int64
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > z.left {
		n = z.left
	}
	clear(p[:n])
	z.left -= n
	z.sent.Add(n)
	return int(n), nil
}

// chunkedUpload sends an importCodes multipart request whose file part is
// size zero bytes, as a chunked body (no Content-Length), and returns the
// status. sent counts the body bytes the client produced.
func chunkedUpload(url, authorization string, size int64, sent *atomic.Int64) (int, error) {
	// A raw connection rather than http.Client: the server answers a refused
	// upload and closes without reading on, and http.Client, still writing,
	// reports its broken pipe instead of the answer unless the answer came
	// within 50 ms. Here the body is written on its own goroutine and the
	// answer read regardless.
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var mwBuf bytes.Buffer
	mw := multipart.NewWriter(&mwBuf)
	head := "POST /graphql HTTP/1.1\r\nHost: " + strings.TrimPrefix(url, "http://") +
		"\r\nTransfer-Encoding: chunked\r\nContent-Type: " + mw.FormDataContentType() + "\r\n"
	if authorization != "" {
		head += "Authorization: " + authorization + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return 0, err
	}
	go func() {
		cw := httputil.NewChunkedWriter(conn)
		_ = mw.WriteField("operations", `{"query": "mutation($in: ImportCodesInput!) { importCodes(input: $in) { batch { inserted } } }",
			"variables": {"in": {"sku": "GC", "location": "AMS", "batchRef": "B-1", "file": null}}}`)
		_ = mw.WriteField("map", `{"0": ["variables.in.file"]}`)
		if _, err := mw.CreateFormFile("0", "codes.csv"); err != nil {
			return
		}
		// The fields and the file part's header, then the file's bytes
		// straight to the connection, then the closing boundary.
		if _, err := cw.Write(mwBuf.Bytes()); err != nil {
			return
		}
		mwBuf.Reset()
		if _, err := io.Copy(cw, &zeros{left: size, sent: sent}); err != nil {
			return
		}
		_ = mw.Close()
		_, _ = cw.Write(mwBuf.Bytes())
		_ = cw.Close()
		_, _ = io.WriteString(conn, "\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestUploadRefusedBeforeBodyIsRead sends uploads from every role that may not
// upload, as bodies that never end: the refusal must come from the headers
// alone (401 without a usable token, 403 with one), and nothing is imported.
func TestUploadRefusedBeforeBodyIsRead(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-1") { token } }`, nil), "issueCheckoutToken", &tok)

	for _, c := range []struct {
		name, authorization string
		want                int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"bad token", "Bearer inv_not-a-key", http.StatusUnauthorized},
		{"checkout token", "Bearer " + tok.Token, http.StatusForbidden},
		{"service key", "Bearer " + ts.service, http.StatusForbidden},
	} {
		var sent atomic.Int64
		// 1 TiB: were the server to read the body, it would not answer in time.
		done := make(chan struct{})
		var status int
		var err error
		go func() {
			defer close(done)
			status, err = chunkedUpload(ts.url, c.authorization, 1<<40, &sent)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10 s (%d bytes sent): the server is reading the body", c.name, sent.Load())
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if status != c.want {
			t.Errorf("%s: status %d, want %d", c.name, status, c.want)
		}
	}
	if n := ts.count(`SELECT count(*) FROM code_batches`); n != 0 {
		t.Errorf("%d code batches imported by refused uploads", n)
	}
}

// TestUploadMemoryBounded sends eight anonymous and eight admin 64 MiB chunked
// uploads at once and checks how much the process allocated meanwhile: the
// anonymous ones must be refused unread and the admin ones cut off at the
// in-memory threshold, instead of each being buffered whole (which took the
// server's peak memory up by 1.2 GiB). It does not run in parallel, so the
// allocation count is this test's own.
func TestUploadMemoryBounded(t *testing.T) {
	ts := setup(t)
	const size = 64 << 20
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)

	var wg sync.WaitGroup
	var sent atomic.Int64
	statuses := make([]int, 16)
	errs := make([]error, 16)
	for i := range statuses {
		authorization := ""
		if i%2 == 1 {
			authorization = "Bearer " + ts.admin
		}
		wg.Go(func() { statuses[i], errs[i] = chunkedUpload(ts.url, authorization, size, &sent) })
	}
	wg.Wait()
	runtime.ReadMemStats(&m1)

	for i, st := range statuses {
		if errs[i] != nil {
			t.Fatalf("upload %d: %v", i, errs[i])
		}
		want := http.StatusUnauthorized
		if i%2 == 1 {
			want = http.StatusUnprocessableEntity // gqlgen's answer when the body limit trips
		}
		if st != want {
			t.Errorf("upload %d: status %d, want %d", i, st, want)
		}
	}
	allocated := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("16 chunked uploads of %d MiB: client produced %d MiB, process allocated %d MiB", size>>20, sent.Load()>>20, allocated>>20)
	if allocated > 64<<20 {
		t.Errorf("process allocated %d MiB for 16 refused uploads; want under 64 MiB", allocated>>20)
	}
	if n := ts.count(`SELECT count(*) FROM code_batches`); n != 0 {
		t.Errorf("%d code batches imported by refused uploads", n)
	}
}
