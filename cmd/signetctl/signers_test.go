package main

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
)

var kepPoints = []string{"Trust distribution:", "Permitted subjects:", "Permitted extensions:", "Permitted key usages:", "Expiration:", "CA bit:", "Extra PEM blocks:"}

func TestSigners(t *testing.T) {
	t.Setenv("COLUMNS", "80")
	addr, dir := devServer(t)
	code, out, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("output:\n%s", out)
	if !strings.HasPrefix(out, devpki.DefaultSigner+"\n") {
		t.Errorf("output does not start with the dev signer name:\n%s", out)
	}
	for _, want := range append([]string{"Profile:", "custom", "Max lifetime:", "Key types:"}, kepPoints...) {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, label := range kepPoints {
		if !strings.Contains(out, "\n  "+label) {
			t.Errorf("point %q is not a labelled line", label)
		}
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line of %d runes exceeds COLUMNS=80: %q", n, line)
		}
		if line != devpki.DefaultSigner && !strings.HasPrefix(line, "  ") {
			t.Errorf("line not indented: %q", line)
		}
	}
}

func TestSignersJSON(t *testing.T) {
	addr, dir := devServer(t)
	code, out, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var resp signetv1.ListSignersResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("output is not a ListSignersResponse: %v\n%s", err, out)
	}
	if len(resp.GetSigners()) != 1 || resp.GetSigners()[0].GetSignerName() != devpki.DefaultSigner || resp.GetSigners()[0].GetCaBit() == "" {
		t.Fatalf("signers = %v", resp.GetSigners())
	}
}

func TestSignersUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"signers", "--output", "xml", "--dev-state-dir", "d"}, {"signers", "extra", "--dev-state-dir", "d"}, {"signers", "--nope"}} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestSignersLintGate: signetctl signers shows each signer's effective lint gate: the number of
// lints and their sources, the exclusions (default and configured, each with its reason) and
// the findings the profile accepts by design; --output json lists the lints in force; a signer
// without a gate says so.
func TestSignersLintGate(t *testing.T) {
	t.Setenv("COLUMNS", "400")
	addr, dir := devServer(t, func(cfg *config.Config) {
		cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
		cfg.Lint.Exclude = []string{"e_rfc_dnsname_empty_label"}
	})
	code, out, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"Lint gate: ", "lints in force from RFC3279,", "Lints excluded: ",
		"e_rfc_dnsname_empty_label: configured (lint.exclude)",
		"w_ext_subject_key_identifier_missing_sub_cert: RFC 5280 makes SKI",
		"Accepted findings: e_ecdsa_allowed_ku: kubelets with ECDSA keys", "e_key_usage_and_extended_key_usage_inconsistent: kubelets with RSA keys",
		"e_subject_common_name_max_length, e_subject_dn_serial_number_max_length",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("signers output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCmd("signers", "--server", addr, "--dev-state-dir", dir, "--output", "json")
	var resp signetv1.ListSignersResponse
	if err := protojson.Unmarshal([]byte(out), &resp); code != 0 || err != nil {
		t.Fatalf("json output (exit %d): %v\n%s", code, err, out)
	}
	lints := resp.GetSigners()[0].GetLint().GetLints()
	if !slices.Contains(lints, "e_key_usage_and_extended_key_usage_inconsistent") || slices.Contains(lints, "e_rfc_dnsname_empty_label") || len(lints) < 100 {
		t.Errorf("json lint list (%d lints) must hold the accepted lint and not the excluded one", len(lints))
	}

	addr, dir = devServer(t, func(cfg *config.Config) { cfg.Lint.Disabled = true })
	if code, out, _ = runCmd("signers", "--server", addr, "--dev-state-dir", dir); !strings.Contains(out, "off (lint.disabled)") {
		t.Errorf("signers without a gate (exit %d) does not say it is off:\n%s", code, out)
	}
}
