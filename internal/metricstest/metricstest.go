// Package metricstest helps the tests of the binaries' metrics types hold their nil-receiver
// contract (a nil *Metrics records nothing and never panics) for every method, found by
// reflection: the arguments each method is called with, and a call that reports its panic.
package metricstest

import (
	"reflect"
	"testing"
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
