package e2e

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFaviconServed: over real HTTP, /favicon.ico answers 200 with an icon
// (ICO whose every entry is a PNG that decodes at its stated size), to anyone,
// cacheable; and every page (GraphiQL at /, the sign-in form and the
// dashboard at /admin) links it, so no browser tab asks for it in vain.
func TestFaviconServed(t *testing.T) {
	t.Parallel()
	ts := setup(t)

	resp, err := http.Get(ts.url + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /favicon.ico: %d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "image/x-icon" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
		t.Fatalf("Cache-Control %q: a favicon should be cached", cc)
	}
	checkICO(t, body)

	for _, page := range []struct{ name, token, path, marker string }{
		{"GraphiQL", "", "/", "graphiql"},
		{"sign-in form", "", "/admin", `id="signin"`},
		{"dashboard", ts.admin, "/admin", `id="webhooks"`},
	} {
		status, html := httpGetAs(t, ts.url+page.path, page.token)
		if status != http.StatusOK || !strings.Contains(html, page.marker) {
			t.Fatalf("%s: %d %.200s", page.name, status, html)
		}
		if !strings.Contains(html, `<link rel="icon" href="/favicon.ico"`) {
			t.Fatalf("%s does not link /favicon.ico", page.name)
		}
	}
}

// checkICO parses an ICO directory (ICONDIR, then one ICONDIRENTRY per image)
// and decodes each image, which must be a PNG of the entry's size.
func checkICO(t *testing.T, b []byte) {
	t.Helper()
	var dir struct{ Reserved, Type, Count uint16 }
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, &dir); err != nil || dir.Reserved != 0 || dir.Type != 1 || dir.Count == 0 {
		t.Fatalf("not an ICO: %+v %v (% x)", dir, err, b[:min(len(b), 16)])
	}
	for i := range int(dir.Count) {
		var e struct {
			W, H, Colors, Reserved uint8
			Planes, BPP            uint16
			Size, Offset           uint32
		}
		if err := binary.Read(bytes.NewReader(b[6+16*i:]), binary.LittleEndian, &e); err != nil {
			t.Fatal(err)
		}
		if int(e.Offset)+int(e.Size) > len(b) {
			t.Fatalf("entry %d runs past the file: %+v", i, e)
		}
		img, err := png.Decode(bytes.NewReader(b[e.Offset : e.Offset+e.Size]))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if s := img.Bounds().Size(); s.X != int(e.W) || s.Y != int(e.H) {
			t.Fatalf("entry %d: %v, the directory says %dx%d", i, s, e.W, e.H)
		}
	}
}
