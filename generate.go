package main

//go:generate go tool gqlgen generate --config gqlgen.yml
//go:generate sh -c "go run . settings > docs/configuration.md"
