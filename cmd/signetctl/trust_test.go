package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func TestTrust(t *testing.T) {
	addr, dir := devServer(t)
	conn := []string{"--server", addr, "--dev-state-dir", dir}
	caPEM, err := os.ReadFile(filepath.Join(dir, devpki.SignerCACert))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(append([]string{"trust", devpki.DefaultSigner}, conn...)...)
	if code != 0 || out != string(caPEM) {
		t.Errorf("trust: exit %d, stdout:\n%s\nwant the signer's CA certificate:\n%s", code, out, caPEM)
	}
	if !strings.HasPrefix(errOut, "active: ") {
		t.Errorf("stderr %q does not describe the active anchor", errOut)
	}

	for _, format := range []string{"json", "yaml"} {
		code, out, errOut = runCmd(append([]string{"trust", devpki.DefaultSigner, "-o", format}, conn...)...)
		data := []byte(out)
		if format == "yaml" {
			if data, err = yaml.YAMLToJSON(data); err != nil {
				t.Fatal(err)
			}
		}
		var resp signetv1.GetTrustAnchorsResponse
		if err := protojson.Unmarshal(data, &resp); code != 0 || err != nil {
			t.Fatalf("-o %s: exit %d, %v, stderr %q\n%s", format, code, err, errOut, out)
		}
		if len(resp.GetAnchors()) != 1 || resp.GetAnchors()[0].GetState() != signetv1.AnchorState_ANCHOR_STATE_ACTIVE ||
			resp.GetTrustAnchorsPem() != string(caPEM) || resp.GetBundleHash() == "" {
			t.Errorf("-o %s: %v", format, &resp)
		}
	}

	code, out, errOut = runCmd(append([]string{"trust", "example.com/nope"}, conn...)...)
	if code != 1 || out != "" || !strings.Contains(errOut, "refused (UNKNOWN_SIGNER)") {
		t.Errorf("trust of an unknown signer: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
