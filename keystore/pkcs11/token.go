//go:build cgo

package pkcs11

import (
	"fmt"
	"slices"
	"strings"

	cryptoki "github.com/miekg/pkcs11"
)

// token is the slot holding the token a URI selects.
type token struct {
	slot uint
	info cryptoki.TokenInfo
}

// findToken returns the one token that u's token attributes (token, manufacturer, model,
// serial, slot-id) select. A URI must name at least one of them; none matching is an error
// naming them and listing the tokens present, several matching is an error asking for more.
func findToken(m *module, u *keyURI) (token, error) {
	if !u.hasToken && !u.hasSerial && !u.hasSlotID && !u.hasModel && !u.hasManufacturer {
		return token{}, fmt.Errorf("the URI names no token: add token=<label> (or serial=)")
	}
	slots, err := m.ctx.GetSlotList(true)
	if err != nil {
		return token{}, classify("listing the module's slots", err)
	}
	var found []token
	var present []string
	for _, slot := range slots {
		info, err := m.ctx.GetTokenInfo(slot)
		if err != nil {
			if is(err, cryptoki.CKR_TOKEN_NOT_PRESENT, cryptoki.CKR_TOKEN_NOT_RECOGNIZED, cryptoki.CKR_SLOT_ID_INVALID) {
				continue // removed or unusable since GetSlotList
			}
			return token{}, classify(fmt.Sprintf("reading the token of slot %d", slot), err)
		}
		if info.Flags&cryptoki.CKF_TOKEN_INITIALIZED == 0 {
			continue // SoftHSM's free slot, or a blank card
		}
		present = append(present, fmt.Sprintf("%q", info.Label))
		if (u.hasToken && info.Label != u.token) ||
			(u.hasManufacturer && info.ManufacturerID != u.manufacturer) ||
			(u.hasModel && info.Model != u.model) ||
			(u.hasSerial && info.SerialNumber != u.serial) ||
			(u.hasSlotID && slot != u.slotID) {
			continue
		}
		found = append(found, token{slot: slot, info: info})
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		slices.Sort(present)
		if len(present) == 0 {
			return token{}, fmt.Errorf("%s: no such token: the module has no initialized token", u.tokenRef())
		}
		return token{}, fmt.Errorf("%s: no such token (tokens present: %s)", u.tokenRef(), strings.Join(present, ", "))
	default:
		return token{}, fmt.Errorf("%s: %d tokens match; add serial= to choose one", u.tokenRef(), len(found))
	}
}

// sessionLimit is the number of sessions a key may open on tok: a default of 8, capped by the
// token's maximum when it states one.
func sessionLimit(tok token) int {
	const bound = 8
	limit := tok.info.MaxSessionCount
	if limit == cryptoki.CK_EFFECTIVELY_INFINITE || limit == cryptoki.CK_UNAVAILABLE_INFORMATION || limit >= bound {
		return bound
	}
	return int(limit)
}

// openSession opens a session on tok (read-write when rw) and logs in when the application is
// not logged in to the token yet (a new session shares the login of the others; the login
// goes away when the last session closes).
func openSession(m *module, tok token, rw bool, pin, pinRef string) (cryptoki.SessionHandle, error) {
	flags := uint(cryptoki.CKF_SERIAL_SESSION)
	if rw {
		flags |= cryptoki.CKF_RW_SESSION
	}
	sh, err := m.ctx.OpenSession(tok.slot, flags)
	if err != nil {
		return 0, classify(fmt.Sprintf("opening a session on token %q", tok.info.Label), err)
	}
	info, err := m.ctx.GetSessionInfo(sh)
	if err == nil && (info.State == cryptoki.CKS_RO_PUBLIC_SESSION || info.State == cryptoki.CKS_RW_PUBLIC_SESSION) {
		err = login(m, sh, tok, pin, pinRef)
	} else if err != nil {
		err = classify(fmt.Sprintf("reading a session of token %q", tok.info.Label), err)
	}
	if err != nil {
		_ = m.ctx.CloseSession(sh)
		return 0, err
	}
	return sh, nil
}

// login logs the user in on sh. CKR_USER_ALREADY_LOGGED_IN is success: another session of the
// process logged in first. (It is also why a wrong PIN cannot be told from a right one while
// another key of the process is logged in to the same token.)
func login(m *module, sh cryptoki.SessionHandle, tok token, pin, pinRef string) error {
	err := m.ctx.Login(sh, cryptoki.CKU_USER, pin)
	if err == nil || is(err, cryptoki.CKR_USER_ALREADY_LOGGED_IN) {
		return nil
	}
	return loginError(err, pinRef, tok.info.Label)
}

// findObjects returns the handles of the objects matching template, at most max of them.
func findObjects(m *module, sh cryptoki.SessionHandle, template []*cryptoki.Attribute, max int) ([]cryptoki.ObjectHandle, error) {
	if err := m.ctx.FindObjectsInit(sh, template); err != nil {
		return nil, classify("searching the token", err)
	}
	var all []cryptoki.ObjectHandle
	for len(all) < max {
		batch, _, err := m.ctx.FindObjects(sh, min(max-len(all), 64))
		if err != nil {
			_ = m.ctx.FindObjectsFinal(sh)
			return nil, classify("searching the token", err)
		}
		if len(batch) == 0 {
			break
		}
		all = append(all, batch...)
	}
	if err := m.ctx.FindObjectsFinal(sh); err != nil {
		return nil, classify("searching the token", err)
	}
	return all, nil
}

// objectTemplate returns the search template of private keys (class) with u's object= and id=.
func objectTemplate(class uint, u *keyURI) []*cryptoki.Attribute {
	t := []*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_CLASS, class)}
	if u.hasObject {
		t = append(t, cryptoki.NewAttribute(cryptoki.CKA_LABEL, u.object))
	}
	if u.hasID {
		t = append(t, cryptoki.NewAttribute(cryptoki.CKA_ID, u.id))
	}
	return t
}
