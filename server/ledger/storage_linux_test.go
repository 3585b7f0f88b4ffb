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
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// Storage faults on real file systems: a small tmpfs that fills up, and a loop-mounted ext4
// that turns read-only under the ledger. They need root (CI runs as root); a test that cannot
// mount fails.

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it at cleanup
// (after the cleanups registered later, such as the ledger's Close).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mounting a tmpfs (needs root, as in CI): %v", err)
	}
	t.Cleanup(func() {
		// The unmount once failed busy in CI after every assertion had passed and the ledger
		// was closed (something still held the file system for a moment; likely a copy of a
		// descriptor in a process another parallel test forked, before its exec): try again,
		// then detach it, so the cleanup does not fail a test that passed.
		err := syscall.Unmount(dir, 0)
		for i := 0; errors.Is(err, syscall.EBUSY) && i < 50; i++ {
			time.Sleep(20 * time.Millisecond)
			err = syscall.Unmount(dir, 0)
		}
		if errors.Is(err, syscall.EBUSY) {
			t.Logf("unmounting %s: still busy after 1 s; detaching it", dir)
			err = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fillUp writes a file in dir until the file system is full and returns its path.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for i := range block {
		block[i] = 'x'
	}
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the file system: %v", err)
			}
			return p
		}
	}
}

// TestDiskFullThenFreed: on a 1 MiB tmpfs, the ledger appends until the disk is full. Appends
// then fail as retryable ErrUnavailable, nothing acknowledged is lost, the ledger stays
// closed while the disk is full, and it reopens by itself once space is freed: a retry
// succeeds with the next seq, with no restart.
func TestDiskFullThenFreed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.dir = filepath.Join(mountTmpfs(t, "1m"), "ledger")
	f.prealloc = 64 << 10
	f.recoverEvery = 5 * time.Millisecond
	l := f.open(t)
	filler := fillUp(t, filepath.Dir(f.dir))

	acked := 0
	var err error
	for i := 0; i < 100_000; i++ {
		if _, err = l.Append(context.Background(), issued(i)); err != nil {
			break
		}
		acked++
	}
	if !errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrRestartRequired) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: err = %v, want retryable ErrUnavailable wrapping ENOSPC", err)
	}
	t.Logf("%d records acknowledged before the disk was full: %v", acked, err)
	time.Sleep(50 * time.Millisecond) // ~10 recovery attempts, all failing
	if _, err := l.Append(context.Background(), issued(-1)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Append while the disk is still full: err = %v, want ErrUnavailable", err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != acked {
		t.Fatalf("Verify on the full disk: %+v, %v; want the %d acknowledged records", rep, err, acked)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ledger to recover once space is freed", func() bool { return l.Err() == nil })
	r, err := l.Append(context.Background(), issued(acked))
	if err != nil || r.Seq != uint64(acked)+1 {
		t.Fatalf("Append after space was freed: %+v, %v; want seq %d", r, err, acked+1)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != acked+1 || rep.TornTail != 0 {
		t.Errorf("Verify after recovery: %+v, %v; want %d records and no torn tail", rep, err, acked+1)
	}
}

// TestSegmentRemovedOnTmpfs: the segment is removed from a real file system while appends
// go on; every acknowledged record is in the restored segment.
func TestSegmentRemovedOnTmpfs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Room for every record the appends can make before the removal is noticed (about 1 KiB
	// each, some 8,000 in the test's 20 ms on this machine): a smaller file system fills up
	// first, and the ledger then stops for space, not for the lost segment.
	f.dir = filepath.Join(mountTmpfs(t, "64m"), "ledger")
	f.recoverEvery = 5 * time.Millisecond
	l := f.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acked := make(chan uint64, 1<<16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if r, err := l.Append(ctx, issued(i)); err == nil {
				acked <- r.Seq
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := os.Remove(filepath.Join(f.dir, segment)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the segment to be restored", func() bool { return l.Stats().Restores == 1 })
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	close(acked)
	var last uint64
	for seq := range acked {
		if seq != last+1 {
			t.Fatalf("acknowledged seq %d after %d", seq, last)
		}
		last = seq
	}
	rep, err := ledger.Verify(f.dir)
	if err != nil || rep.LastSeq != last {
		t.Fatalf("Verify: %+v, %v; want every acknowledged record, up to seq %d", rep, err, last)
	}
	t.Logf("%d records acknowledged, all in the restored segment", last)
}

// TestFileSystemTurnsReadOnly: the ext4 file system holding the ledger turns read-only under
// it (an error makes the kernel remount it read-only, errors=remount-ro). Appends fail as
// ErrUnavailable saying the directory is not writable; no record after the fault is
// acknowledged, and those before it are on the disk. Such a file system stays read-only
// until it is unmounted and checked; once it is mounted writable again, the server's next
// start appends after the last acknowledged record.
func TestFileSystemTurnsReadOnly(t *testing.T) {
	t.Parallel()
	img := filepath.Join(t.TempDir(), "ext4.img")
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "truncate", "-s", "16M", img)
	run(t, "mkfs.ext4", "-q", "-F", img)
	mount := func() {
		run(t, "mount", "-o", "loop,errors=remount-ro", img, mnt)
	}
	mount()
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", mnt).Run()
		}
	})

	f := newFixture(t)
	f.dir = filepath.Join(mnt, "ledger")
	f.recoverEvery = 5 * time.Millisecond
	l, err := ledger.Open(f.dir, f.options())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 0, 3)

	dev := strings.TrimSpace(run(t, "findmnt", "-n", "-o", "SOURCE", mnt))
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("signet test\n"), 0o200); err != nil {
		t.Fatalf("making ext4 fail (%s): %v", trigger, err)
	}
	_, err = l.Append(context.Background(), issued(3))
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrNotWritable) {
		t.Fatalf("Append on the read-only file system: err = %v, want ErrUnavailable and ErrNotWritable", err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := l.Err(); err == nil {
		t.Fatal("the ledger reopened on a read-only file system")
	}
	l.Close()

	run(t, "umount", mnt)
	mounted = false
	_ = exec.Command("e2fsck", "-f", "-y", img).Run() // exit status 1: errors corrected
	mount()
	mounted = true
	l2 := f.open(t)
	if r, err := l2.Append(context.Background(), issued(3)); err != nil || r.Seq != 4 {
		t.Fatalf("Append after the file system was checked and mounted again: %+v, %v; want seq 4", r, err)
	}
	l2.Close()
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 4 {
		t.Errorf("Verify: %+v, %v; want 4 records", rep, err)
	}
}

// run runs a command and returns its output, failing the test if it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
