// Package graphiql serves the GraphiQL IDE from assets embedded in the binary,
// so the page works on a machine with no internet access. gqlgen renders the
// page; this package only points it at the local copies, with subresource
// integrity hashes computed from the bytes actually served.
package graphiql

import (
	"crypto/sha512"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"

	"github.com/99designs/gqlgen/graphql/playground"
)

// Versions of the embedded assets (npm: graphiql 4.1.2, react 18.2.0, react-dom 18.2.0).
//
//go:embed assets
var assets embed.FS

// Handler returns the IDE page for endpoint, loading its assets from prefix
// (which must be where Assets is mounted, e.g. "/graphiql/").
func Handler(endpoint, prefix string) http.HandlerFunc {
	return playground.Handler("Inventory GraphQL", endpoint,
		playground.WithGraphiqlVersion(prefix+"graphiql.min.js", prefix+"graphiql.min.css", sri("graphiql.min.js"), sri("graphiql.min.css")),
		playground.WithGraphiqlReactVersion(prefix+"react.production.min.js", prefix+"react-dom.production.min.js",
			sri("react.production.min.js"), sri("react-dom.production.min.js")),
		playground.WithGraphiqlEnablePluginExplorer(false),
	)
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
