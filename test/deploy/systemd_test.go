package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	serverUnit     = "deploy/server/signet-server.service"
	serverDropIns  = "deploy/server/dropins"
	sysusersFile   = "deploy/server/signet.sysusers.conf"
	tmpfilesFile   = "deploy/server/signet.tmpfiles.conf"
	serverBinary   = "/usr/local/bin/signet-server"
	credentialsDir = "/run/credentials/signet-server.service" // $CREDENTIALS_DIRECTORY of the unit
	// maxExposure is the highest `systemd-analyze security` exposure accepted for the unit,
	// alone or with any one of its drop-ins (1.2 and, with the TPM drop-in, 1.4 when written).
	maxExposure = 1.5
)

// unitEntry is one assignment in a systemd unit file or drop-in.
type unitEntry struct {
	section, key, value string
	line                int
}

// unitFile is a parsed unit file or drop-in, its assignments in order.
type unitFile struct {
	path    string
	entries []unitEntry
}

// parseUnit reads a unit file: [Section] headers, Key=Value assignments, # and ; comments,
// backslash continuations.
func parseUnit(path string) (*unitFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := &unitFile{path: path}
	sc := bufio.NewScanner(f)
	section, n, start := "", 0, 0
	var cont strings.Builder
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cont.Len() == 0 {
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			start = n
			if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
				section = line[1 : len(line)-1]
				continue
			}
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			cont.WriteString(body + " ")
			continue
		}
		cont.WriteString(line)
		text := cont.String()
		cont.Reset()
		k, v, ok := strings.Cut(text, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("%s:%d: want Key=Value inside a [Section]: %q", path, start, text)
		}
		u.entries = append(u.entries, unitEntry{section: section, key: strings.TrimSpace(k), value: strings.TrimSpace(v), line: start})
	}
	return u, sc.Err()
}

// values returns every value assigned to key in section, in order (an empty one resets a
// list in systemd).
func (u *unitFile) values(section, key string) []string {
	var out []string
	for _, e := range u.entries {
		if e.section == section && e.key == key {
			out = append(out, e.value)
		}
	}
	return out
}

// last returns the value that wins for a single-valued key, and whether it is set.
func (u *unitFile) last(section, key string) (string, bool) {
	v := u.values(section, key)
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func loadUnit(t *testing.T, rel string) *unitFile {
	t.Helper()
	u, err := parseUnit(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestServerUnitDirectives checks, by parsing, the hardening the unit must keep: what
// `systemd-analyze security` rates, and what the server's own files need.
func TestServerUnitDirectives(t *testing.T) {
	u := loadUnit(t, serverUnit)
	for key, want := range map[string]string{
		"User": "signet", "Group": "signet", "StateDirectory": "signet", "UMask": "0077",
		"ReadOnlyPaths":  "/etc/signet",
		"ProtectSystem":  "strict",
		"ProtectHome":    "yes",
		"PrivateTmp":     "yes",
		"PrivateDevices": "yes", "PrivateMounts": "yes",
		"ProtectProc": "invisible", "ProcSubset": "pid",
		"NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
		"RestrictSUIDSGID": "yes", "LockPersonality": "yes", "MemoryDenyWriteExecute": "yes",
		"RestrictRealtime": "yes", "RestrictNamespaces": "yes", "RemoveIPC": "yes",
		"ProtectClock": "yes", "ProtectHostname": "yes", "ProtectKernelLogs": "yes",
		"ProtectKernelModules": "yes", "ProtectKernelTunables": "yes", "ProtectControlGroups": "yes",
		"SystemCallErrorNumber": "EPERM", "SystemCallArchitectures": "native",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"IPAddressDeny":           "any",
	} {
		if got, ok := u.last("Service", key); !ok || got != want {
			t.Errorf("%s: %s=%q (set: %v), want %q", serverUnit, key, got, ok, want)
		}
	}
	if got := u.values("Service", "SystemCallFilter"); !slices.Equal(got, []string{"@system-service", "~@privileged @resources"}) {
		t.Errorf("%s: SystemCallFilter %q: want @system-service, then ~@privileged @resources", serverUnit, got)
	}
	allow := strings.Join(u.values("Service", "IPAddressAllow"), " ")
	if !strings.Contains(allow, "localhost") {
		t.Errorf("%s: IPAddressAllow %q: the HTTP address (127.0.0.1:9464) needs localhost", serverUnit, allow)
	}
	exec, _ := u.last("Service", "ExecStart")
	if !strings.HasPrefix(exec, serverBinary+" ") {
		t.Errorf("%s: ExecStart=%s: want %s", serverUnit, exec, serverBinary)
	}
	if slices.Contains(u.values("Service", "DynamicUser"), "yes") {
		t.Errorf("%s: DynamicUser=yes: the signet user comes from %s", serverUnit, sysusersFile)
	}
}

// TestServerDropIns checks the drop-ins the unit's comments point to.
func TestServerDropIns(t *testing.T) {
	network := loadUnit(t, serverDropIns+"/10-network.conf")
	if got := network.values("Service", "IPAddressAllow"); len(got) < 2 || got[0] != "" || got[1] != "localhost" {
		t.Errorf("10-network.conf: IPAddressAllow %q: want an empty assignment (dropping the unit's list) then localhost", got)
	}
	tpm := loadUnit(t, serverDropIns+"/20-tpm.conf")
	for key, want := range map[string]string{"PrivateDevices": "no", "DevicePolicy": "closed", "DeviceAllow": "/dev/tpmrm0 rw", "SupplementaryGroups": "tss"} {
		if got, _ := tpm.last("Service", key); got != want {
			t.Errorf("20-tpm.conf: %s=%q, want %q", key, got, want)
		}
	}
	creds := loadUnit(t, serverDropIns+"/30-credentials.conf")
	text := readFile(t, serverDropIns+"/30-credentials.conf")
	tmpfiles := readFile(t, tmpfilesFile)
	lc := creds.values("Service", "LoadCredential")
	if len(lc) == 0 {
		t.Fatal("30-credentials.conf: no LoadCredential=")
	}
	for _, v := range lc {
		id, src, ok := strings.Cut(v, ":")
		if !ok || !filepath.IsAbs(src) {
			t.Errorf("30-credentials.conf: LoadCredential=%s: want ID:/absolute/source", v)
			continue
		}
		if !strings.Contains(tmpfiles, filepath.Dir(src)+" ") {
			t.Errorf("30-credentials.conf: the source folder %s is not made by %s", filepath.Dir(src), tmpfilesFile)
		}
		// The server does not expand $CREDENTIALS_DIRECTORY: the documented URI names it in full.
		if !strings.Contains(text, "pin-source=file:"+credentialsDir+"/"+id) && !strings.Contains(text, "passphrase-file="+credentialsDir+"/"+id) {
			t.Errorf("30-credentials.conf: no key URI example reads the credential %s from %s/%s", id, credentialsDir, id)
		}
	}
	for _, d := range []*unitFile{network, tpm, creds} {
		for _, e := range d.entries {
			if e.section != "Service" {
				t.Errorf("%s:%d: [%s]: the drop-ins change [Service] only", d.path, e.line, e.section)
			}
		}
	}
}

// unitVariants are the unit alone and with each drop-in, as the test installs them.
func unitVariants(t *testing.T) map[string][]string {
	t.Helper()
	dropins, err := filepath.Glob(filepath.Join(repoRoot, serverDropIns, "*.conf"))
	if err != nil || len(dropins) == 0 {
		t.Fatalf("no drop-ins in %s: %v", serverDropIns, err)
	}
	v := map[string][]string{"unit": nil}
	for _, d := range dropins {
		v["unit+"+filepath.Base(d)] = []string{d}
	}
	return v
}

// installUnit writes the unit into a new folder as signet-server.service, its ExecStart
// pointed at a stub executable (verify checks that the binary exists), and the drop-ins into
// signet-server.service.d/ beside it, where systemd-analyze finds them. It returns the unit's
// path.
func installUnit(t *testing.T, dropins []string) string {
	t.Helper()
	dir := t.TempDir()
	stub := filepath.Join(dir, "signet-server")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(readFile(t, serverUnit), "ExecStart="+serverBinary+" ", "ExecStart="+stub+" ")
	path := filepath.Join(dir, "signet-server.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range dropins {
		data, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "signet-server.service.d", filepath.Base(d))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

var exposureRE = regexp.MustCompile(`Overall exposure level for [^:]+: (\d+\.\d+)`)

// TestServerUnitSystemdAnalyze runs `systemd-analyze verify` on the unit, alone and with each
// drop-in: any warning (an unknown key, a bad value, a missing binary) fails. Then
// `systemd-analyze security --offline=yes` must rate each at most maxExposure. Without
// systemd-analyze, TestServerUnitDirectives's parsing is the check.
func TestServerUnitSystemdAnalyze(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not installed (hack/node-deps.sh installs the systemd package): the unit cannot be verified")
	}
	for name, dropins := range unitVariants(t) {
		t.Run(name, func(t *testing.T) {
			path := installUnit(t, dropins)
			out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
			}
			out, err = exec.Command(sa, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
			m := exposureRE.FindSubmatch(out)
			if m == nil {
				if strings.Contains(string(out), "offline") {
					t.Fatalf("this systemd-analyze cannot rate a unit file offline (systemd < 250 is too old for this test): %s", out)
				}
				t.Fatalf("systemd-analyze security --offline=yes %s: %v\n%s", name, err, out)
			}
			exposure, _ := strconv.ParseFloat(string(m[1]), 64)
			t.Logf("%s: exposure %.1f", name, exposure)
			if exposure > maxExposure {
				t.Errorf("%s: systemd-analyze security rates it %.1f, above %.1f:\n%s", name, exposure, maxExposure, flagged(out))
			}
		})
	}
}

// flagged keeps the lines of a security report that name a weakness.
func flagged(report []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(report), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "✗") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestSysusersFile: one system user signet, its home the unit's state folder, no login
// shell, the user and group the unit runs as.
func TestSysusersFile(t *testing.T) {
	var users []string
	for _, l := range strings.Split(readFile(t, sysusersFile), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			users = append(users, l)
		}
	}
	if len(users) != 1 {
		t.Fatalf("%s: want one line, got %q", sysusersFile, users)
	}
	f := sysusersFields(users[0])
	if len(f) != 6 || f[0] != "u" || f[1] != "signet" || f[2] != "-" || f[4] != "/var/lib/signet" || f[5] != "/usr/sbin/nologin" {
		t.Errorf("%s: %q: want u signet - \"…\" /var/lib/signet /usr/sbin/nologin", sysusersFile, f)
	}
	u := loadUnit(t, serverUnit)
	if user, _ := u.last("Service", "User"); user != f[1] {
		t.Errorf("%s runs as %q, %s makes %q", serverUnit, user, sysusersFile, f[1])
	}
	if state, _ := u.last("Service", "StateDirectory"); "/var/lib/"+state != f[4] {
		t.Errorf("%s: StateDirectory=%s, the user's home is %s", serverUnit, state, f[4])
	}
}

// sysusersFields splits a sysusers.d line into its fields, a "quoted" GECOS as one.
func sysusersFields(line string) []string {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				return append(out, line)
			}
			out = append(out, line[1:end+1])
			line = line[end+2:]
			continue
		}
		f, rest, _ := strings.Cut(line, " ")
		out = append(out, f)
		line = rest
	}
	return out
}

// TestSysusersAndTmpfilesApply runs systemd-sysusers and then systemd-tmpfiles on the two
// files in a scratch root, as a package install would: the user exists as a system user, and
// /etc/signet (0750 root:signet) and its credentials folder (0700 root) are made.
func TestSysusersAndTmpfilesApply(t *testing.T) {
	sysusers, err1 := exec.LookPath("systemd-sysusers")
	tmpfiles, err2 := exec.LookPath("systemd-tmpfiles")
	if err1 != nil || err2 != nil {
		t.Fatal("systemd-sysusers or systemd-tmpfiles not installed (hack/node-deps.sh installs the systemd package)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("not root: systemd-tmpfiles cannot set owners in a scratch root (make test runs as root, as the kubelet tests need)")
	}
	root := t.TempDir()
	for src, dst := range map[string]string{sysusersFile: "usr/lib/sysusers.d/signet.conf", tmpfilesFile: "usr/lib/tmpfiles.d/signet.conf"} {
		if err := copyFile(filepath.Join(repoRoot, src), filepath.Join(root, dst)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, "signet.conf").CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	uid, gid := lookupUser(t, root, "signet")
	if uid <= 0 || uid >= 1000 {
		t.Errorf("signet has uid %d: want a system user (1–999)", uid)
	}
	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", "signet.conf").CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	for dir, want := range map[string]struct {
		mode     os.FileMode
		uid, gid int
	}{
		"etc/signet":             {0o750, 0, gid},
		"etc/signet/credentials": {0o700, 0, 0},
	} {
		fi, err := os.Stat(filepath.Join(root, dir))
		if err != nil {
			t.Errorf("systemd-tmpfiles did not make /%s: %v", dir, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != want.mode || int(st.Uid) != want.uid || int(st.Gid) != want.gid {
			t.Errorf("/%s: mode %#o owner %d:%d, want %#o %d:%d", dir, fi.Mode().Perm(), st.Uid, st.Gid, want.mode, want.uid, want.gid)
		}
	}
}

// lookupUser returns name's uid and gid from root/etc/passwd.
func lookupUser(t *testing.T, root, name string) (uid, gid int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Split(l, ":")
		if len(f) == 7 && f[0] == name {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			if f[5] != "/var/lib/signet" || f[6] != "/usr/sbin/nologin" {
				t.Errorf("passwd: %s", l)
			}
			return uid, gid
		}
	}
	t.Fatalf("systemd-sysusers made no user %s:\n%s", name, data)
	return 0, 0
}
