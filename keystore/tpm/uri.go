package tpm

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-tpm/tpm2"
)

// DefaultDevice is the TPM a URI without device= or socket= names: the kernel's resource
// manager, which gives each open file its own view of the TPM's transient objects.
const DefaultDevice = "/dev/tpmrm0"

// Persistent handles a URI may name: the owner's and the platform's ranges. Generate makes keys
// in the owner's range only, as TPM2_EvictControl with owner authorization requires.
const (
	firstPersistent      = 0x81000000
	lastOwnerPersistent  = 0x817FFFFF
	lastPersistentHandle = 0x81FFFFFF
)

// location is a parsed tpm: URI: which key (a persistent handle, a blob file, or none when
// the URI names only a TPM) on which TPM (a device or a swtpm socket).
type location struct {
	handle tpm2.TPMHandle // non-zero for handle=
	blob   string         // non-empty for blob=
	device string         // the TPM character device; DefaultDevice when no attribute names one
	socket string         // non-empty for socket=: raw TPM commands on a unix socket
}

// parseURI parses a tpm: URI (see the package doc for the grammar). Errors name the part of
// the URI at fault.
func parseURI(uri string) (location, error) {
	var loc location
	rest, ok := strings.CutPrefix(uri, "tpm:")
	if !ok {
		return loc, fmt.Errorf("parsing key URI %q: not a tpm: URI", uri)
	}
	if strings.Contains(rest, "#") {
		return loc, fmt.Errorf("parsing key URI %q: a tpm: URI has no fragment (escape # as %%23)", uri)
	}
	keyPart, query, _ := strings.Cut(rest, "?")
	if err := loc.parseKey(keyPart); err != nil {
		return loc, fmt.Errorf("parsing key URI %q: %w", uri, err)
	}
	if err := loc.parseQuery(query); err != nil {
		return loc, fmt.Errorf("parsing key URI %q: %w", uri, err)
	}
	return loc, nil
}

// parseKey parses the part between "tpm:" and the query: empty, handle=0x81…, or blob=path.
func (loc *location) parseKey(s string) error {
	if s == "" {
		return nil
	}
	name, raw, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not name=value (want handle=0x81000000… or blob=/path)", s)
	}
	value, err := url.PathUnescape(raw)
	if err != nil {
		return fmt.Errorf("%s=: %w", name, err)
	}
	switch name {
	case "handle":
		h, err := parseHandle(value)
		if err != nil {
			return err
		}
		loc.handle = h
	case "blob":
		if value == "" {
			return fmt.Errorf("blob= names no file")
		}
		loc.blob = value
	default:
		return fmt.Errorf("unknown key %q (want handle= or blob=)", name)
	}
	return nil
}

// parseHandle parses a persistent handle written in hexadecimal with a 0x prefix.
func parseHandle(s string) (tpm2.TPMHandle, error) {
	hex, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok || hex == "" || len(hex) > 8 {
		return 0, fmt.Errorf("handle=%q: want a persistent handle in hexadecimal, 0x81000000 to 0x81FFFFFF", s)
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || v < firstPersistent || v > lastPersistentHandle {
		return 0, fmt.Errorf("handle=%q: want a persistent handle in hexadecimal, 0x81000000 to 0x81FFFFFF", s)
	}
	return tpm2.TPMHandle(v), nil
}

// parseQuery parses the attributes selecting the TPM. Unknown and repeated attributes are
// refused by name, and so is naming both a device and a socket.
func (loc *location) parseQuery(query string) error {
	loc.device = DefaultDevice
	if query == "" {
		return nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	for name, vs := range values {
		switch name {
		case "device", "socket":
		default:
			return fmt.Errorf("unknown attribute %q (want device= or socket=)", name)
		}
		if len(vs) > 1 {
			return fmt.Errorf("attribute %q given %d times", name, len(vs))
		}
		if vs[0] == "" {
			return fmt.Errorf("attribute %s= is empty", name)
		}
	}
	if len(values) > 1 {
		return fmt.Errorf("device= and socket= both given: name one TPM")
	}
	if v, ok := values["device"]; ok {
		loc.device = v[0]
	}
	if v, ok := values["socket"]; ok {
		loc.device, loc.socket = "", v[0]
	}
	return nil
}

// String formats loc as its canonical URI: a lower-case eight-digit handle, the blob path as
// given, and the TPM attribute only when it is not the default device.
func (loc location) String() string {
	var b strings.Builder
	b.WriteString("tpm:")
	switch {
	case loc.handle != 0:
		fmt.Fprintf(&b, "handle=0x%08x", uint32(loc.handle))
	case loc.blob != "":
		b.WriteString("blob=" + escapePath(loc.blob))
	}
	switch {
	case loc.socket != "":
		b.WriteString("?socket=" + escapeQuery(loc.socket))
	case loc.device != DefaultDevice && loc.device != "":
		b.WriteString("?device=" + escapeQuery(loc.device))
	}
	return b.String()
}

// withHandle returns the URI of the persistent key at h on loc's TPM.
func (loc location) withHandle(h tpm2.TPMHandle) location {
	loc.blob, loc.handle = "", h
	return loc
}

// absolute returns loc with its blob path made absolute, for a canonical URI that does not
// depend on the working directory.
func (loc location) absolute() location {
	if loc.blob != "" {
		if abs, err := filepath.Abs(loc.blob); err == nil {
			loc.blob = abs
		}
	}
	return loc
}

// tpmName names loc's TPM in errors: "device=/dev/tpmrm0" or "socket=/run/swtpm.sock".
func (loc location) tpmName() string {
	if loc.socket != "" {
		return "socket=" + loc.socket
	}
	return "device=" + loc.device
}

// keyName names loc's key in errors: "handle=0x81000100" or "blob=/path".
func (loc location) keyName() string {
	if loc.handle != 0 {
		return fmt.Sprintf("handle=0x%08x", uint32(loc.handle))
	}
	return "blob=" + loc.blob
}

// escapePath escapes the characters that would end the key part of a URI or change its
// meaning, keeping slashes readable.
func escapePath(v string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(v)
}

// escapeQuery escapes the characters that would end or change a query value.
func escapeQuery(v string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "%20", ";", "%3B").Replace(v)
}
