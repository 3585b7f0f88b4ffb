package ledger_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
)

// The read-only tests must really fail to write, also as root, which ignores permission bits.
// Three ways, each checked with a probe write before the ledger is tried (a method that does
// not take effect fails the test rather than passing vacuously):
//
//   - a read-only bind mount of the directory in a private mount namespace (EROFS): the test
//     binary re-executes itself with CLONE_NEWNS, so the mount never leaks. Needs CAP_SYS_ADMIN.
//   - the immutable attribute (chattr +i, EPERM): no one, root included, can create a file in
//     the directory until the attribute is removed. Needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs.
//   - chmod 0500, only when not running as root.

const roHelperEnv = "SIGNET_LEDGER_TEST_RO_DIR"

// wantNotWritable checks that opening dir fails and says why, naming it.
func wantNotWritable(t *testing.T, dir string) {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err == nil {
		l.Close()
		t.Fatalf("Open(%s) of an unwritable directory succeeded", dir)
	}
	if !errors.Is(err, ledger.ErrNotWritable) || !strings.Contains(err.Error(), "ledger directory "+dir+" is not writable") {
		t.Fatalf("Open: err = %q, want ErrNotWritable naming %s", err, dir)
	}
	t.Logf("Open: %v", err)
}

// probeFails reports whether creating a file in dir fails, and how.
func probeFails(dir string) (bool, error) {
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err == nil {
		f.Close()
		os.Remove(filepath.Join(dir, "probe"))
		return false, nil
	}
	return true, err
}

// seed creates a ledger in dir with one record, so the unwritable cases cover an existing one.
func seed(t *testing.T, dir string) {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), issued(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUnwritableDirectory makes the ledger directory really unwritable and checks that
// Open refuses it, naming the directory: as root (the CI case) with the immutable attribute and
// with a read-only bind mount, otherwise with chmod 0500.
func TestOpenUnwritableDirectory(t *testing.T) {
	if os.Getuid() != 0 {
		dir := filepath.Join(t.TempDir(), "ledger")
		seed(t, dir)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		if failed, err := probeFails(dir); !failed {
			t.Fatalf("chmod 0500 did not stop writes (%v)", err)
		}
		wantNotWritable(t, dir)
		return
	}
	t.Run("immutable attribute", testOpenImmutableDirectory)
	t.Run("read-only bind mount", testOpenReadOnlyMount)
}

func testOpenReadOnlyMount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	seed(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyMountHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), roHelperEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReadOnlyMountHelper") {
		t.Fatalf("helper in a private mount namespace: %v\n%s", err, out)
	}
	t.Logf("helper:\n%s", out)
	// Outside the namespace the directory is writable again: the mount did not leak.
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatalf("Open outside the namespace: %v", err)
	}
	l.Close()
}

// TestReadOnlyMountHelper does its work only inside testOpenReadOnlyMount's private mount
// namespace (the environment names the directory); run directly it has nothing to do.
func TestReadOnlyMountHelper(t *testing.T) {
	dir := os.Getenv(roHelperEnv)
	if dir == "" {
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("read-only remount: %v", err)
	}
	if failed, err := probeFails(dir); !failed || !errors.Is(err, syscall.EROFS) {
		t.Fatalf("probe write on the read-only mount: failed=%v err=%v, want EROFS", failed, err)
	}
	wantNotWritable(t, dir)
}

// chattrPath finds chattr (Debian e2fsprogs); the immutable-attribute tests need it.
func chattrPath(t *testing.T) string {
	t.Helper()
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Fatalf("chattr (Debian e2fsprogs) is required for this test: %v", err)
	}
	return chattr
}

func testOpenImmutableDirectory(t *testing.T) {
	chattr := chattrPath(t)
	dir := filepath.Join(t.TempDir(), "ledger")
	seed(t, dir)
	if out, err := exec.Command(chattr, "+i", dir).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(chattr, "-i", dir).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v: %s", dir, err, out)
		}
	})
	if failed, err := probeFails(dir); !failed {
		t.Fatalf("probe write in the immutable directory succeeded")
	} else {
		t.Logf("probe: %v", err)
	}
	wantNotWritable(t, dir)
}

func TestOpenUnderRegularFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ledger.Open(filepath.Join(file, "ledger"), ledger.Options{})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open under a regular file: err = %v", err)
	}
}

// TestAppendFailsWhenSegmentBecomesImmutable is a real file-system fault, not an injected one:
// the segment turns immutable under an open Ledger, so the kernel refuses the write (EPERM).
func TestAppendFailsWhenSegmentBecomesImmutable(t *testing.T) {
	chattr := chattrPath(t)
	f := newFixture(t)
	l := f.open(t)
	if _, err := l.Append(context.Background(), issued(1)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(f.dir, segment)
	if out, err := exec.Command(chattr, "+i", seg).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v: %s", err, out)
	}
	immutable := true
	release := func() {
		if immutable {
			if out, err := exec.Command(chattr, "-i", seg).CombinedOutput(); err != nil {
				t.Errorf("chattr -i: %v: %s", err, out)
			}
			immutable = false
		}
	}
	t.Cleanup(release)
	_, err := l.Append(context.Background(), issued(2))
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrNotWritable) || !strings.Contains(err.Error(), "ledger directory "+f.dir+" is not writable") {
		t.Fatalf("Append to an immutable segment: err = %v, want ErrUnavailable and ErrNotWritable naming the directory", err)
	}
	release()
	if _, err := l.Append(context.Background(), issued(3)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Append after the fault cleared: err = %v, want ErrUnavailable until reopened", err)
	}
	l.Close()
	l2 := f.open(t)
	if r, err := l2.Append(context.Background(), issued(2)); err != nil || r.Seq != 2 {
		t.Errorf("Append after reopen: %+v, %v", r, err)
	}
}
