package signerapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// TestClientVersionCheckScope: the check applies to signet.v1 calls that carry a version; the
// health service, calls without the header and supported clients pass untouched; what a client
// sends is cleaned before it is logged or repeated; each refused (client, version) is logged
// once.
func TestClientVersionCheckScope(t *testing.T) {
	var logs bytes.Buffer
	var refused []string
	check := ClientVersionCheck("v0.3.1", slog.New(slog.NewTextHandler(&logs, nil)), func(v string) { refused = append(refused, v) })
	call := func(method string, md ...string) error {
		ctx := context.Background()
		if len(md) > 0 {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(md...))
		}
		_, err := check(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return "ok", nil })
		return err
	}
	const sign = "/signet.v1.SignerService/SignCertificateSigningRequest"
	for name, err := range map[string]error{
		"health, an unsupported version": call("/grpc.health.v1.Health/Check", signetv1.ClientVersionHeader, "v0.9.0"),
		"no header":                      call(sign),
		"another header":                 call(sign, "user-agent", "v0.9.0"),
		"supported":                      call(sign, signetv1.ClientVersionHeader, "v0.2.3"),
		"development client":             call(sign, signetv1.ClientVersionHeader, "devel"),
		"ledger service, supported":      call("/signet.v1.LedgerService/FindRecords", signetv1.ClientVersionHeader, "v0.3.0"),
		"authority service, development": call("/signet.v1.AuthorityService/GetAuthority", signetv1.ClientVersionHeader, "abc1234"),
	} {
		if err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for _, method := range []string{sign, "/signet.v1.LedgerService/FindRecords", "/signet.v1.AuthorityService/StageCA"} {
		if err := call(method, signetv1.ClientVersionHeader, "v0.4.0"); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s from a v0.4.0 client: %v, want FailedPrecondition", method, err)
		}
	}
	if n := strings.Count(logs.String(), "refused a client's version"); n != 1 {
		t.Errorf("one client refused three times is logged %d times, want once:\n%s", n, logs.String())
	}
	if want := []string{"v0.4.0", "v0.4.0", "v0.4.0"}; !slices.Equal(refused, want) {
		t.Errorf("refusals counted: %q, want every one of them, %q", refused, want)
	}

	// A version no tag names is a development build's, accepted with a warning; the warning
	// carries the cleaned, clipped text, never the raw bytes.
	hostile := "v9.0.0\n\x1b[31mlevel=ERROR " + strings.Repeat("x", 200)
	if err := call(sign, signetv1.ClientVersionHeader, hostile); err != nil {
		t.Fatalf("a version that is no release: %v, want accepted as a development build", err)
	}
	long := "v0.1.0-" + strings.Repeat("a", 100)
	if err := call(sign, signetv1.ClientVersionHeader, long); status.Code(err) != codes.FailedPrecondition ||
		refused[len(refused)-1] != long[:maxVersionLength] {
		t.Errorf("a v0.1.0 client: %v, counted as %q; want refused and counted with the clipped version", err, refused[len(refused)-1])
	}
	if len(refused) != 4 {
		t.Errorf("refusals counted: %q; accepted calls are not counted", refused)
	}
	if !strings.Contains(logs.String(), "accepting a client without a version check") || strings.Contains(logs.String(), "\x1b") ||
		strings.Contains(logs.String(), strings.Repeat("x", maxVersionLength)) || !strings.Contains(logs.String(), cleanVersion(hostile)) {
		t.Errorf("the warning does not carry the cleaned version %q:\n%s", cleanVersion(hostile), logs.String())
	}
}

// TestCleanVersion: versions pass unchanged, anything else is reduced and clipped.
func TestCleanVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.1":                   "v0.3.1",
		"v0.3.0-12-gabc1234-dirty": "v0.3.0-12-gabc1234-dirty",
		"v0.3.0+meta.1":            "v0.3.0+meta.1",
		"(devel)":                  "(devel)",
		"v1 \"quoted\"\n":          "v1__quoted__",
		strings.Repeat("9", 100):   strings.Repeat("9", maxVersionLength),
		"v1.0.0\u202e":             "v1.0.0_", // a multi-byte character is one "_"
	} {
		if got := cleanVersion(in); got != want {
			t.Errorf("cleanVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRememberedPairsBounded: the set of logged pairs never grows past its bound.
func TestRememberedPairsBounded(t *testing.T) {
	r := &rememberedPairs{pairs: map[string]bool{}}
	if !r.first("a") || r.first("a") {
		t.Fatal("a pair is not new exactly once")
	}
	for i := range 3 * maxRemembered {
		r.first(fmt.Sprint(i))
		if len(r.pairs) > maxRemembered {
			t.Fatalf("%d pairs remembered, bound %d", len(r.pairs), maxRemembered)
		}
	}
}
