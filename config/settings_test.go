package config

import (
	"reflect"
	"slices"
	"testing"
)

// TestSettingsMatchConfig: settings.go, from which docs/configuration.md is
// generated, is the truth about the configuration: Load reads exactly
// the names it lists, and setting each to its documented default changes
// nothing.
func TestSettingsMatchConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x"}
	var read []string
	want, err := Load(func(k string) string {
		read = append(read, k)
		return base[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range Settings {
		listed = append(listed, s.Name)
	}
	slices.Sort(read)
	read = slices.Compact(read)
	slices.Sort(listed)
	if !slices.Equal(read, listed) {
		t.Fatalf("Load reads %v\nSettings lists %v", read, listed)
	}
	for _, s := range Settings {
		if s.Default == "" {
			if s.Shown == "" {
				t.Errorf("%s: neither a default nor how the docs show its absence", s.Name)
			}
			continue
		}
		env := map[string]string{"DATABASE_URL": "postgres://x", s.Name: s.Default}
		got, err := Load(func(k string) string { return env[k] })
		if err != nil {
			t.Errorf("%s=%s: %v", s.Name, s.Default, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s (its documented default) gives another configuration than leaving it unset", s.Name, s.Default)
		}
	}
}
