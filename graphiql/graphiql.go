// Package graphiql serves the GraphiQL IDE from assets embedded in the binary,
// so the page works on a machine with no internet access. The page
// (page.html) loads the local copies with subresource integrity hashes
// computed from the bytes actually served, and opens on Starter, a document
// for this API, instead of GraphiQL's welcome text.
package graphiql

import (
	"bytes"
	"crypto/sha512"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"net/http"
)

// Versions of the embedded assets (npm: graphiql 4.1.2, react 18.2.0, react-dom 18.2.0).
//
//go:embed assets
var assets embed.FS

//go:embed page.html
var pageHTML string

// Starter is the document a new GraphiQL tab opens on: an availability query
// of the demo catalog's SKUs (the ones `inventory demo` loads) that runs as
// is, then the reserve and confirmReservation calls, commented out, with what
// each needs in the Authorization header. TestGraphiQLStarterDocument runs it
// in the browser and TestGraphiQLStarterExamples runs the commented calls.
//
//go:embed starter.graphql
var Starter string

// EditorFlex is the query editor's share of the page against the response
// pane's 1 (GraphiQL's default is 1: half each), until the user drags the
// divider; 1.8 gives the editor about 64 %: at 1400 px wide, the whole of
// Starter (at most 73 columns) shows without scrolling sideways.
const EditorFlex = "1.8"

var page = template.Must(template.New("graphiql").Parse(pageHTML))

// Handler returns the IDE page for endpoint, loading its assets from prefix
// (which must be where Assets is mounted, e.g. "/graphiql/").
func Handler(endpoint, prefix string) http.HandlerFunc {
	var buf bytes.Buffer
	err := page.Execute(&buf, map[string]string{
		"Endpoint": endpoint, "Prefix": prefix, "Starter": Starter, "EditorFlex": EditorFlex,
		"JSSRI": sri("graphiql.min.js"), "CSSSRI": sri("graphiql.min.css"),
		"ReactSRI": sri("react.production.min.js"), "ReactDOMSRI": sri("react-dom.production.min.js"),
	})
	if err != nil {
		panic("graphiql: page template: " + err.Error()) // the template and its data are fixed at build time
	}
	body := buf.Bytes()
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(body)
	}
}

// Assets serves the embedded files; mount it under Handler's prefix.
func Assets() http.Handler {
	sub, _ := fs.Sub(assets, "assets") // the directory is embedded, so Sub cannot fail
	return http.FileServerFS(sub)
}

func sri(name string) string {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		panic("graphiql: missing embedded asset " + name)
	}
	sum := sha512.Sum384(b)
	return "sha384-" + base64.StdEncoding.EncodeToString(sum[:])
}
