package adversarial

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/server/ledger"
)

// maxRefusedLine is the most bytes a refused record's line may take, whatever the caller sent.
const maxRefusedLine = 8 << 10

// decision is how an answer counts: a ledger decision ("issued", "refused:REASON") when
// recorded, else why not ("replayed", "rate limited", "tls", "wire", "explain", ...).
type decision struct {
	label    string
	recorded bool
}

// classify counts one answer from what it is, not from what was expected: the ledger must hold
// exactly the decisions the server made. seen holds the serials answered so far; the first
// answer carrying a serial is its issuance, later ones are replays.
func classify(cc *corpusCase, got *result, seen map[string]bool) decision {
	switch {
	case cc.req.explain != nil:
		return decision{label: "explain"}
	case got.err == nil && seen[got.serial]:
		return decision{label: "replayed"}
	case got.err == nil:
		seen[got.serial] = true
		return decision{label: "issued", recorded: true}
	}
	info := errorInfo(got.err)
	switch {
	case info == nil && slices.Contains(tlsRefusedClients, cc.client):
		return decision{label: "tls"}
	case info == nil:
		return decision{label: "wire " + status.Code(got.err).String()}
	case info.GetReason() == reasonRateLimited:
		return decision{label: "rate limited"}
	case info.GetReason() == "LEDGER_UNAVAILABLE":
		return decision{label: "ledger unavailable"}
	}
	return decision{label: "refused:" + info.GetReason(), recorded: true}
}

// identityOf is the ledger Client of a client key.
func identityOf(client string) string {
	switch client {
	case clientForeign, clientExpired, clientWrongEKU:
		return identities[clientTool]
	case clientStranger:
		return "adversarial-stranger"
	}
	return identities[client]
}

// matchable reports whether a UID reaches the ledger as it is (printable ASCII, at most 128
// bytes), so that records can be matched to cases by client and UID.
func matchable(uid string) bool {
	if uid == "" || len(uid) > 128 {
		return false
	}
	for i := 0; i < len(uid); i++ {
		if uid[i] < 0x21 || uid[i] > 0x7e {
			return false
		}
	}
	return true
}

// ledgerContents is the ledger read back: its records (verified) and their lines.
type ledgerContents struct {
	records []ledger.Record
	lines   [][]byte
}

// readLedger replays the ledger in dir and splits its segment files into lines.
func readLedger(t *testing.T, dir string) ledgerContents {
	t.Helper()
	var lc ledgerContents
	if err := ledger.Replay(dir, time.Time{}, func(r ledger.Record) error {
		lc.records = append(lc.records, r)
		return nil
	}); err != nil {
		t.Fatalf("replaying the ledger: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "ledger-*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ledger segment in %s (%v)", dir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		data := readFile(t, f)
		if i := bytes.IndexByte(data, 0); i >= 0 {
			data = data[:i] // the free space
		}
		for line := range bytes.SplitSeq(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			if len(line) > 0 {
				lc.lines = append(lc.lines, line)
			}
		}
	}
	if len(lc.lines) != len(lc.records) {
		t.Fatalf("the ledger has %d lines but %d records", len(lc.lines), len(lc.records))
	}
	return lc
}

// ledgerFigures are what the ledger checks measure.
type ledgerFigures struct {
	records, maxRefusedLine int
}

// checkLedger compares the ledger with the answers and returns the violations.
func checkLedger(cases []*corpusCase, got map[string]*result, lc ledgerContents) ([]string, ledgerFigures) {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	want := map[string][]string{} // client + "\x00" + uid → decisions, for matchable UIDs
	unmatchedWant, recordable := 0, 0
	serials := map[string]bool{}
	seen := map[string]bool{}
	for _, cc := range cases {
		d := classify(cc, got[cc.name], seen)
		if d.label == "issued" {
			serials[got[cc.name].serial] = true
		}
		uid := cc.req.objectUID()
		if d.recorded {
			recordable++
		}
		if !matchable(uid) {
			if d.recorded {
				unmatchedWant++
			}
			continue
		}
		key := identityOf(cc.client) + "\x00" + uid
		if _, ok := want[key]; !ok {
			want[key] = []string{} // also a case that must leave no record
		}
		if d.recorded {
			want[key] = append(want[key], d.label)
		}
	}
	if len(lc.records) != recordable {
		bad("the ledger holds %d records, the corpus made %d recordable decisions", len(lc.records), recordable)
	}
	have := map[string][]string{}
	unmatchedHave, issuedBySerial := 0, map[string]int{}
	var fig ledgerFigures
	fig.records = len(lc.records)
	for i, r := range lc.records {
		label := "issued"
		if r.Decision == ledger.Refused {
			label = "refused:" + r.Reason
			fig.maxRefusedLine = max(fig.maxRefusedLine, len(lc.lines[i]))
			if len(lc.lines[i]) > maxRefusedLine {
				bad("record %d (refused %s) is a line of %d bytes, over %d", r.Seq, r.Reason, len(lc.lines[i]), maxRefusedLine)
			}
		} else {
			issuedBySerial[r.Serial]++
		}
		if why := recordControls(r); why != "" {
			bad("record %d (%s %s, client %q, object %s): %s", r.Seq, r.Decision, r.Reason, r.Client, clip(r.ObjectUID, 40), why)
		}
		key := r.Client + "\x00" + r.ObjectUID
		if _, ok := want[key]; !ok {
			unmatchedHave++
			continue
		}
		have[key] = append(have[key], label)
	}
	for key, w := range want {
		h := have[key]
		slices.Sort(w)
		slices.Sort(h)
		if !slices.Equal(w, h) {
			client, uid, _ := strings.Cut(key, "\x00")
			bad("client %q object %s: ledger has %q, the answers were %q", client, uid, h, w)
		}
	}
	if unmatchedHave != unmatchedWant {
		bad("%d records for requests with an empty, long or unprintable UID, the corpus made %d such recordable decisions", unmatchedHave, unmatchedWant)
	}
	for s := range serials {
		if issuedBySerial[s] != 1 {
			bad("issued serial %s is in %d issued records, want 1", s, issuedBySerial[s])
		}
	}
	for s, n := range issuedBySerial {
		if !serials[s] {
			bad("the ledger records %d issuance(s) of serial %s that no answer carried", n, s)
		}
	}
	return v, fig
}

// recordControls says which field of r holds a raw control character, "" if none; the
// certificate's PEM may hold line ends.
func recordControls(r ledger.Record) string {
	for name, s := range map[string]string{
		"signer": r.Signer, "client": r.Client, "requester": r.Requester, "objectUID": r.ObjectUID,
		"objectKind": r.ObjectKind, "idempotencyKey": r.IdempotencyKey, "requestHash": r.RequestHash,
		"serial": r.Serial, "reason": r.Reason, "message": r.Message, "grounds": r.Grounds,
	} {
		if strings.ContainsFunc(s, isControl) {
			return fmt.Sprintf("field %s holds a control character: %s", name, clip(s, 120))
		}
	}
	if strings.ContainsFunc(r.Certificate, func(c rune) bool { return c != '\n' && isControl(c) }) {
		return "the certificate holds a control character"
	}
	return ""
}

// signetctlVerify builds cmd/signetctl and runs `signetctl ledger verify` on dir.
func signetctlVerify(t *testing.T, dir string) error {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "signetctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/signet-pki/signet/cmd/signetctl").CombinedOutput(); err != nil {
		t.Fatalf("building signetctl: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "ledger", "verify", "--dir", dir).CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("ledger OK")) {
		return fmt.Errorf("signetctl ledger verify: %v\n%s", err, out)
	}
	t.Logf("signetctl ledger verify: %s", bytes.TrimSpace(bytes.SplitN(out, []byte("\n"), 2)[0]))
	return nil
}
