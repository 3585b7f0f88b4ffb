package ociimage

import (
	"fmt"
	"os"
)

// RootFS returns the files a static Go program needs from a distribution, for a scratch
// base: /etc/passwd and /etc/group with root and nonroot (65532, home /home/nonroot, no
// shell), /etc/nsswitch.conf (hosts: files dns, so that /etc/hosts and hostAliases are read
// first), the CA bundle at CABundlePath, a world-writable sticky /tmp, and /home/nonroot
// owned by 65532.
func RootFS(caBundle []byte) []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID))},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID))},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: CABundlePath, Mode: 0o644, Data: caBundle},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: UID, GID: GID},
	}
}

// readBinary reads a compiled program.
func readBinary(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	return data, nil
}
