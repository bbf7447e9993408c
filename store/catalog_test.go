package store_test

import (
	"strings"
	"testing"

	"inventory/domain"
)

func TestLocationCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)

	loc, err := b.store.LocationCreate(b.ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam", Priority: 2})
	if err != nil {
		t.Fatal(err)
	}
	if loc != (domain.Location{Code: "AMS", Name: "Amsterdam", Priority: 2}) {
		t.Fatalf("got %+v", loc)
	}
	_, err = b.store.LocationCreate(b.ctx, domain.CreateLocationInput{Code: "AMS", Name: "Other"})
	requireCode(t, err, domain.CodeAlreadyExists)

	for _, in := range []domain.CreateLocationInput{
		{Code: "", Name: "x"},
		{Code: strings.Repeat("L", 129), Name: "x"},
		{Code: "tab\there", Name: "x"},
		{Code: "OK", Name: "  "},
		{Code: "OK", Name: "x", Priority: domain.MaxPriority + 1},
	} {
		_, err := b.store.LocationCreate(b.ctx, in)
		requireCode(t, err, domain.CodeInvalidInput)
	}
	locs, err := b.store.LocationList(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 1 || locs[0].Name != "Amsterdam" {
		t.Fatalf("refused creates changed the catalog: %+v", locs)
	}
	// 128 characters is the documented maximum and is accepted.
	if _, err := b.store.LocationCreate(b.ctx, domain.CreateLocationInput{Code: strings.Repeat("é", 128), Name: "long"}); err != nil {
		t.Fatalf("128-character code refused: %v", err)
	}
}

func requireCode(t *testing.T, err error, code domain.ErrorCode) *domain.Error {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok {
		t.Fatalf("want a %s business error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s (%s)", code, e.Code, e.Message)
	}
	return e
}
