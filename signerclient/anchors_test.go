package signerclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// anchorServer answers GetTrustAnchors from a map of signer name to answer; an unknown signer
// gets NotFound.
type anchorServer struct {
	signetv1.UnimplementedSignerServiceServer
	anchors map[string]*signetv1.GetTrustAnchorsResponse
}

func (s *anchorServer) GetTrustAnchors(_ context.Context, req *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	resp, ok := s.anchors[req.GetSignerName()]
	if !ok {
		return nil, status.Error(codes.NotFound, "unknown signer")
	}
	return resp, nil
}

// startSignerService serves srv over mTLS on a loopback port until the test ends and returns
// a client of it with the RPC timeout given.
func startSignerService(t *testing.T, srv signetv1.SignerServiceServer, timeout time.Duration) *Client {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	return newTestClient(t, Config{
		Address: net.JoinHostPort("localhost", port),
		CAFile:  caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: timeout,
	})
}

func TestTrustAnchors(t *testing.T) {
	since := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	notAfter := time.Date(2041, 5, 1, 12, 0, 0, 0, time.UTC)
	c := startSignerService(t, &anchorServer{anchors: map[string]*signetv1.GetTrustAnchorsResponse{
		"example.com/serving": {TrustAnchorsPem: testChain + testChain, BundleHash: "abc123", Anchors: []*signetv1.TrustAnchor{
			{CertificatePem: testChain, State: signetv1.AnchorState_ANCHOR_STATE_ACTIVE, Fingerprint: "AA01",
				Subject: "CN=active", SerialNumber: "01", NotAfter: timestamppb.New(notAfter)},
			{CertificatePem: testChain, State: signetv1.AnchorState_ANCHOR_STATE_STAGED, Since: timestamppb.New(since), Fingerprint: "bb02"},
			{State: signetv1.AnchorState_ANCHOR_STATE_RETIRED},
			{State: signetv1.AnchorState(42)},
		}},
		"example.com/old":   {TrustAnchorsPem: testChain},
		"example.com/empty": {},
	}}, 5*time.Second)
	ctx := context.Background()

	got, err := c.TrustAnchors(ctx, "example.com/old")
	if err != nil || string(got) != testChain {
		t.Errorf("TrustAnchors(example.com/old) = %q, %v; want %q", got, err, testChain)
	}
	set, err := c.TrustAnchorSet(ctx, "example.com/old")
	if err != nil || string(set.PEM) != testChain || set.Anchors != nil || set.BundleHash != "" {
		t.Errorf("TrustAnchorSet of an older server's answer = %+v, %v; want the PEM alone", set, err)
	}

	set, err = c.TrustAnchorSet(ctx, "example.com/serving")
	if err != nil {
		t.Fatalf("TrustAnchorSet(example.com/serving): %v", err)
	}
	if string(set.PEM) != testChain+testChain || set.BundleHash != "abc123" || len(set.Anchors) != 4 {
		t.Fatalf("TrustAnchorSet(example.com/serving) = %+v", set)
	}
	active, staged := set.Anchors[0], set.Anchors[1]
	if active.State != AnchorActive || active.Fingerprint != "aa01" || active.Subject != "CN=active" ||
		active.SerialNumber != "01" || !active.NotAfter.Equal(notAfter) || !active.Since.IsZero() || string(active.CertificatePEM) != testChain {
		t.Errorf("active anchor = %+v", active)
	}
	if staged.State != AnchorStaged || !staged.Since.Equal(since) || staged.Fingerprint != "bb02" || !staged.NotAfter.IsZero() {
		t.Errorf("staged anchor = %+v", staged)
	}
	if s := set.Anchors[2].State; s != AnchorRetired {
		t.Errorf("retired anchor's state = %q", s)
	}
	if s := set.Anchors[3].State; s != AnchorUnknown {
		t.Errorf("state of an unknown enum value = %q, want %q", s, AnchorUnknown)
	}

	if _, err := c.TrustAnchors(ctx, "example.com/empty"); !errors.Is(err, errNoAnchors) {
		t.Errorf("TrustAnchors of an empty answer: err = %v, want errNoAnchors", err)
	}
	if _, err := c.TrustAnchorSet(ctx, "example.com/empty"); !errors.Is(err, errNoAnchors) {
		t.Errorf("TrustAnchorSet of an empty answer: err = %v, want errNoAnchors", err)
	}
	if _, err := c.TrustAnchorSet(ctx, "example.com/unknown"); status.Code(err) != codes.NotFound {
		t.Errorf("TrustAnchorSet of an unknown signer: err = %v, want the server's NotFound", err)
	}
}

func TestAnchorState(t *testing.T) {
	for s, want := range map[signetv1.AnchorState]string{
		signetv1.AnchorState_ANCHOR_STATE_UNSPECIFIED: AnchorUnknown,
		signetv1.AnchorState_ANCHOR_STATE_ACTIVE:      AnchorActive,
		signetv1.AnchorState_ANCHOR_STATE_STAGED:      AnchorStaged,
		signetv1.AnchorState_ANCHOR_STATE_RETIRED:     AnchorRetired,
		signetv1.AnchorState_ANCHOR_STATE_REMOVED:     AnchorRemoved,
	} {
		if got := AnchorState(s); got != want {
			t.Errorf("AnchorState(%s) = %q, want %q", s, got, want)
		}
	}
	if got := AnchorFromProto(nil); got.State != AnchorUnknown || got.CertificatePEM != nil {
		t.Errorf("AnchorFromProto(nil) = %+v", got)
	}
}
