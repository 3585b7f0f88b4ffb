package pkcs11

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// keyURI is a parsed RFC 7512 URI, restricted to the attributes this backend uses. Values are
// percent-decoded. The zero value of a string attribute means it was absent; the has* fields
// tell an absent attribute from an empty one where that matters.
type keyURI struct {
	// Token selection (path attributes).
	token, manufacturer, serial, model string
	slotID                             uint
	hasToken, hasSlotID                bool
	hasManufacturer, hasSerial         bool
	hasModel                           bool

	// Object selection (path attributes).
	object    string
	id        []byte
	hasObject bool
	hasID     bool
	hasType   bool // type=private (no other value is accepted)

	// Query attributes.
	modulePath  string
	pinSource   string // the path of the PIN file (file: prefix removed)
	pinValue    string
	hasPINValue bool
}

// pathAttrs and queryAttrs are the attributes parseURI accepts; unsupported lists those RFC
// 7512 defines that this backend refuses, so that the error says "not supported" rather than
// "unknown".
var (
	pathAttrs   = []string{"token", "manufacturer", "serial", "model", "slot-id", "object", "id", "type"}
	queryAttrs  = []string{"module-path", "pin-source", "pin-value"}
	unsupported = map[string]string{
		"library-manufacturer": "", "library-description": "", "library-version": "",
		"slot-description": "", "slot-manufacturer": "",
		"module-name": " (use module-path=)",
	}
)

// parseURI parses a PKCS#11 URI (RFC 7512):
//
//	pkcs11:<path attributes separated by ';'>[?<query attributes separated by '&'>]
//
// It refuses unknown and duplicate attributes, malformed percent-encoding, a type other than
// private, a slot-id that is not a decimal number, both pin-source and pin-value, and a missing
// module-path. Its errors name the attribute and never contain a value other than type's, so
// that a pin-value cannot leak through them.
func parseURI(uri string) (*keyURI, error) {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !strings.EqualFold(scheme, "pkcs11") {
		return nil, errors.New("not a pkcs11: URI")
	}
	path, query, _ := strings.Cut(rest, "?")
	u := &keyURI{}
	seen := map[string]bool{}
	if path != "" {
		for _, attr := range strings.Split(path, ";") {
			if err := u.setAttr(attr, false, seen); err != nil {
				return nil, err
			}
		}
	}
	if query != "" {
		for _, attr := range strings.Split(query, "&") {
			if err := u.setAttr(attr, true, seen); err != nil {
				return nil, err
			}
		}
	}
	if u.modulePath == "" {
		return nil, errors.New("module-path is missing: name the PKCS#11 module (module-path=/path/to/module.so)")
	}
	if u.pinSource != "" && u.hasPINValue {
		return nil, errors.New("both pin-source and pin-value are given: keep one")
	}
	return u, nil
}

// setAttr parses one name=value attribute of the path (or of the query, when inQuery), which
// must be known there and not in seen.
func (u *keyURI) setAttr(attr string, inQuery bool, seen map[string]bool) error {
	name, raw, ok := strings.Cut(attr, "=")
	if name == "" {
		return errors.New("empty attribute (a stray ';', '&' or '=')")
	}
	if !ok {
		return fmt.Errorf("attribute %q has no value (want %s=...)", name, name)
	}
	if hint, ok := unsupported[name]; ok {
		return fmt.Errorf("attribute %q is not supported%s", name, hint)
	}
	allowed, other, where := pathAttrs, queryAttrs, "a query attribute (after '?')"
	if inQuery {
		allowed, other, where = queryAttrs, pathAttrs, "a path attribute (before '?')"
	}
	if !slices.Contains(allowed, name) {
		if slices.Contains(other, name) {
			return fmt.Errorf("attribute %q must be %s", name, where)
		}
		return fmt.Errorf("unknown attribute %q", name)
	}
	if seen[name] {
		return fmt.Errorf("duplicate attribute %q", name)
	}
	seen[name] = true
	value, err := unescape(raw)
	if err != nil {
		return fmt.Errorf("attribute %q: %w", name, err)
	}
	return u.set(name, value)
}

// set stores the decoded value of a known attribute.
func (u *keyURI) set(name string, value []byte) error {
	v := string(value)
	switch name {
	case "token":
		u.token, u.hasToken = v, true
	case "manufacturer":
		u.manufacturer, u.hasManufacturer = v, true
	case "serial":
		u.serial, u.hasSerial = v, true
	case "model":
		u.model, u.hasModel = v, true
	case "slot-id":
		n, err := strconv.ParseUint(v, 10, 0)
		if err != nil {
			return errors.New(`attribute "slot-id" is not a decimal number`)
		}
		u.slotID, u.hasSlotID = uint(n), true
	case "object":
		u.object, u.hasObject = v, true
	case "id":
		u.id, u.hasID = value, true
	case "type":
		if v != "private" {
			return fmt.Errorf("type=%q: only type=private names a signing key", v)
		}
		u.hasType = true
	case "module-path":
		if v == "" {
			return errors.New(`attribute "module-path" is empty`)
		}
		u.modulePath = v
	case "pin-source":
		path, err := pinSourcePath(v)
		if err != nil {
			return err
		}
		u.pinSource = path
	case "pin-value":
		u.pinValue, u.hasPINValue = v, true
	}
	return nil
}

// pinSourcePath returns the file a pin-source names: file:/path, file:///path or a plain path.
func pinSourcePath(v string) (string, error) {
	path := v
	if rest, ok := strings.CutPrefix(v, "file:"); ok {
		path = rest
		if host, ok := strings.CutPrefix(rest, "//"); ok {
			if !strings.HasPrefix(host, "/") {
				return "", errors.New(`attribute "pin-source": a file: URI must not name a host (want file:/path or file:///path)`)
			}
			path = host
		}
	} else if strings.Contains(strings.SplitN(v, "/", 2)[0], ":") {
		return "", errors.New(`attribute "pin-source": only file: sources and plain paths are supported`)
	}
	if path == "" {
		return "", errors.New(`attribute "pin-source" names no file`)
	}
	return path, nil
}

// unescape decodes RFC 3986 percent-encoding. Unlike net/url it never quotes the input in its
// errors, and '+' stays a '+'.
func unescape(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return nil, errors.New("malformed percent-encoding (want %XX with two hex digits)")
		}
		out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
		i += 2
	}
	return out, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// escape percent-encodes v for a URI: everything but RFC 3986's unreserved characters, and in
// a query value also '/' and ':' (RFC 7512's pk11-qchar allows them), so that paths stay
// readable.
func escape(v []byte, query bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for _, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case query && (c == '/' || c == ':'):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// escapeID percent-encodes every byte of an id, the usual form of binary CKA_IDs in URIs.
func escapeID(id []byte) string {
	var b strings.Builder
	for _, c := range id {
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// canonical returns the URI of the key labelled label with CKA_ID id on the token labelled
// tokenLabel, keeping the token selection and the query attributes of u (module-path, and
// pin-source or pin-value as given).
func (u *keyURI) canonical(tokenLabel, label string, id []byte) string {
	parts := []string{"token=" + escape([]byte(tokenLabel), false)}
	if u.hasManufacturer {
		parts = append(parts, "manufacturer="+escape([]byte(u.manufacturer), false))
	}
	if u.hasModel {
		parts = append(parts, "model="+escape([]byte(u.model), false))
	}
	if u.hasSerial {
		parts = append(parts, "serial="+escape([]byte(u.serial), false))
	}
	if u.hasSlotID {
		parts = append(parts, "slot-id="+strconv.FormatUint(uint64(u.slotID), 10))
	}
	if label != "" {
		parts = append(parts, "object="+escape([]byte(label), false))
	}
	if len(id) > 0 {
		parts = append(parts, "id="+escapeID(id))
	}
	parts = append(parts, "type=private")
	query := []string{"module-path=" + escape([]byte(u.modulePath), true)}
	if u.pinSource != "" {
		query = append(query, "pin-source="+escape([]byte(u.pinSource), true))
	}
	if u.hasPINValue {
		query = append(query, "pin-value="+escape([]byte(u.pinValue), true))
	}
	return "pkcs11:" + strings.Join(parts, ";") + "?" + strings.Join(query, "&")
}

// objectRef describes the object= and id= attributes for errors, e.g. `object="ca" id=%01`.
func (u *keyURI) objectRef() string {
	var parts []string
	if u.hasObject {
		parts = append(parts, fmt.Sprintf("object=%q", u.object))
	}
	if u.hasID {
		parts = append(parts, "id="+escapeID(u.id))
	}
	if len(parts) == 0 {
		return "object=/id= (absent)"
	}
	return strings.Join(parts, " ")
}

// tokenRef describes the token selection attributes for errors, e.g. `token="signet"`.
func (u *keyURI) tokenRef() string {
	var parts []string
	if u.hasToken {
		parts = append(parts, fmt.Sprintf("token=%q", u.token))
	}
	if u.hasManufacturer {
		parts = append(parts, fmt.Sprintf("manufacturer=%q", u.manufacturer))
	}
	if u.hasModel {
		parts = append(parts, fmt.Sprintf("model=%q", u.model))
	}
	if u.hasSerial {
		parts = append(parts, fmt.Sprintf("serial=%q", u.serial))
	}
	if u.hasSlotID {
		parts = append(parts, fmt.Sprintf("slot-id=%d", u.slotID))
	}
	return strings.Join(parts, " ")
}

// pinRef names where the PIN came from, for errors: `pin-source "/etc/signet/pin"` or
// "pin-value" (never the PIN).
func (u *keyURI) pinRef() string {
	if u.hasPINValue {
		return "pin-value"
	}
	return fmt.Sprintf("pin-source %q", u.pinSource)
}
