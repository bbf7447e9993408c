package store_test

import (
	"testing"

	"inventory/testkit"
)

// testBundle is what most store tests need: a store on a database of its own
// and a context acting as an admin.
type testBundle struct{ testkit.Kit }

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{testkit.New(t, "test-admin")}
}
