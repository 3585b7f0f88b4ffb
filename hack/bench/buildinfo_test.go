package main

import "testing"

func TestGodebugDefault(t *testing.T) {
	for _, tt := range []struct{ ldflags, want string }{
		{"", ""},
		{"-s -w", ""},
		{"-X=runtime.godebugDefault=schedtrace=2147483647", "schedtrace=2147483647"},
		{"-s -X runtime.godebugDefault=tlsrsakex=1,schedtrace=5 -w", "tlsrsakex=1,schedtrace=5"},
		{"-X=main.version=1.0 -X=runtime.godebugDefault=a=1 -X=runtime.godebugDefault=b=2", "b=2"},
		{"-X=main.version=1.0", ""},
		{`"-X=runtime.godebugDefault=schedtrace=1"`, "schedtrace=1"},
	} {
		if got := godebugDefault(tt.ldflags); got != tt.want {
			t.Errorf("godebugDefault(%q) = %q, want %q", tt.ldflags, got, tt.want)
		}
	}
}
