package fieldscan_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/signet-pki/signet/server/config/fieldscan"
)

func TestParse(t *testing.T) {
	top := func(w string) bool { return w == "clients" }
	for msg, want := range map[string]fieldscan.Problem{
		"signers[0].maxLifetime -1h0m0s is below the 10m floor": {Field: "signers[0].maxLifetime", Message: "-1h0m0s is below the 10m floor"},
		"clients: at least one client identity is required":     {Field: "clients", Message: "at least one client identity is required"},
		"invalid: a word that is no top-level field":            {Message: "invalid: a word that is no top-level field"},
		`unknown field "server.adress" (line 6)`:                {Field: "server.adress", Line: 6, Message: "unknown field"},
		"workers.x (line 4): want a number":                     {Field: "workers.x", Line: 4, Message: "want a number"},
		"yaml: line 3: could not find expected ':'":             {Message: "yaml: line 3: could not find expected ':'"},
	} {
		if got := fieldscan.Parse(msg, top); got != want {
			t.Errorf("Parse(%q) = %+v, want %+v", msg, got, want)
		}
	}
}

func TestSplit(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	if got := fieldscan.Split(fmt.Errorf("config x: %w", errors.Join(a, b))); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Split of a wrapped join = %v, want [a b]", got)
	}
	if got := fieldscan.Split(a); len(got) != 1 || got[0] != a {
		t.Errorf("Split(a) = %v", got)
	}
	if got := fieldscan.Split(nil); got != nil {
		t.Errorf("Split(nil) = %v", got)
	}
}
