package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be a child server too: startChild runs
// this executable with a child role's flag (e.g. -naive-serve) as its
// first argument, as the bench binary is run.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if serve, ok := childRoles[os.Args[1]]; ok {
			if err := serve(); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}
