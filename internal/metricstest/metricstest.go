// Package metricstest helps the tests of the binaries' metrics types hold their nil-receiver
// contract (a nil *Metrics records nothing and never panics) for every method, found by
// reflection: the arguments each method is called with, and a call that reports its panic.
package metricstest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// Args returns the arguments to call method (of a type: its receiver is its first parameter,
// name is how failures name it) with: overrides[name] when set, otherwise representative's value
// for each parameter's type. It fails t when a type has no representative value, or an
// override does not fit the parameters.
func Args(t testing.TB, name string, method reflect.Method, representative map[reflect.Type]any, overrides map[string][]any) []reflect.Value {
	t.Helper()
	over, overridden := overrides[name]
	if overridden && len(over) != method.Type.NumIn()-1 {
		t.Fatalf("%s takes %d arguments, the overrides give %d", name, method.Type.NumIn()-1, len(over))
	}
	var args []reflect.Value
	for i := 1; i < method.Type.NumIn(); i++ {
		in := method.Type.In(i)
		v, ok := representative[in]
		if overridden {
			v, ok = over[i-1], true
		}
		if !ok {
			t.Fatalf("%s: no representative argument of type %s: add one to the representative values (or the method to the overrides)", name, in)
		}
		if rv := reflect.ValueOf(v); !rv.Type().AssignableTo(in) {
			t.Fatalf("%s: argument %d is a %s, want %s", name, i, rv.Type(), in)
		}
		args = append(args, reflect.ValueOf(v))
	}
	return args
}

// Recover calls f and returns what it panicked with, nil if it did not.
func Recover(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// NilRecordsNothing holds one call to the nil contract: record called on the zero M (a nil
// pointer) must not panic; called on fresh's new metrics, it must change the series of its
// gatherer whose names start with prefix, so that the nil receiver's silence is a choice and
// not a call that records nothing anyway. what names the call in failures.
func NilRecordsNothing[M any](t testing.TB, what string, record func(M), fresh func() (M, prometheus.Gatherer), prefix string) {
	t.Helper()
	var zero M
	if p := Recover(func() { record(zero) }); p != nil {
		t.Errorf("%s on a nil receiver panics: %v", what, p)
	}
	m, g := fresh()
	before := Series(t, g, prefix)
	if p := Recover(func() { record(m) }); p != nil {
		t.Fatalf("%s on new metrics panics: %v", what, p)
	}
	if Series(t, g, prefix) == before {
		t.Errorf("%s on new metrics records nothing either: the nil case shows nothing (give it arguments that record)", what)
	}
}

// Series returns the metric families g gathers whose names start with prefix, encoded (the Go
// runtime and process collectors change by themselves, so they are left out).
func Series(t testing.TB, g prometheus.Gatherer, prefix string) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			if b, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(b, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return string(b)
}
