package api

import (
	"fmt"
	"strings"
)

// longName returns the first name in a GraphQL document longer than
// MaxNameBytes, or "" if there is none, scanning its bytes without parsing
// (strings, block strings and comments skipped): a body-sized document of
// long aliases is then refused before gqlgen decodes, lexes, parses and
// validates it, which costs more CPU than any answer an anonymous caller
// may get. The check after parsing (checkNames) stays for what this does
// not see (persisted queries found by their hash).
func longName(doc string) string {
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case strings.HasPrefix(doc[i:], `"""`):
			end := strings.Index(doc[i+3:], `"""`)
			if end < 0 {
				return ""
			}
			i += 3 + end + 3
		case c == '"':
			i++
			for i < len(doc) && doc[i] != '"' && doc[i] != '\n' {
				if doc[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '#':
			for i < len(doc) && doc[i] != '\n' && doc[i] != '\r' {
				i++
			}
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			start := i
			for i < len(doc) && (doc[i] == '_' || doc[i] >= 'A' && doc[i] <= 'Z' || doc[i] >= 'a' && doc[i] <= 'z' || doc[i] >= '0' && doc[i] <= '9') {
				i++
			}
			if i-start > MaxNameBytes {
				return doc[start:i]
			}
		default:
			i++
		}
	}
	return ""
}

// longNameRefusal says which name is too long, quoting only its start.
func longNameRefusal(name string) string {
	return fmt.Sprintf("the name %.40q… is %d bytes long; names and aliases are at most %d", name, len(name), MaxNameBytes)
}
