package api

import (
	_ "embed" // favicon.ico
	"net/http"
)

// faviconICO is the server's icon (a parcel on a blue tile, 16 and 32 px PNGs
// in an ICO), for the browser tabs of GraphiQL and /admin: both pages link
// it, and browsers that ask for /favicon.ico on their own find it too.
//
//go:embed favicon.ico
var faviconICO []byte

// favicon answers /favicon.ico. The icon only changes with the binary, so a
// day's caching is safe.
func favicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(faviconICO)
}
