//go:build cgo

package pkcs11

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	cryptoki "github.com/miekg/pkcs11"
)

// module is a loaded and initialized PKCS#11 module, shared by every Key, Generate and List
// call of the process on the same module path (a module has one global state per process:
// a second context on it would share its login and its C_Finalize).
type module struct {
	path string // the module's real path (symbolic links resolved): the registry key
	ctx  *cryptoki.Ctx
	refs int // guarded by registry.mu
	// owned is set when our C_Initialize initialized the module, so that the last release
	// finalizes it; a module someone else in the process initialized is left to them.
	owned bool // guarded by registry.mu
	// epoch counts our successful C_Initialize calls. A key opened in an earlier epoch holds
	// session and object handles of a finalized module: it must not use them, since the new
	// initialization may have given the same numbers to other sessions and objects.
	epoch atomic.Uint64
}

// registry holds the modules in use, by real path.
var registry struct {
	mu      sync.Mutex
	modules map[string]*module
}

// acquireModule returns the module at path, loading and initializing it on first use, and
// re-initializing it when it was finalized underneath us (C_Initialize answers
// CKR_CRYPTOKI_ALREADY_INITIALIZED while it is still up). Each acquireModule must be paired
// with one release. Errors name module-path.
func acquireModule(path string) (*module, error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("module-path %q: no such file (is the PKCS#11 module installed?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("module-path %q: %w", path, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, fmt.Errorf("module-path %q: %w", path, err)
	}
	if info, err := os.Stat(real); err != nil {
		return nil, fmt.Errorf("module-path %q: %w", path, err)
	} else if info.IsDir() {
		return nil, fmt.Errorf("module-path %q is a directory, not a PKCS#11 module", path)
	}

	registry.mu.Lock()
	defer registry.mu.Unlock()
	m := registry.modules[real]
	if m == nil {
		ctx := cryptoki.New(real)
		if ctx == nil {
			return nil, fmt.Errorf("module-path %q: cannot load it as a PKCS#11 module (not a shared library exporting C_GetFunctionList for this platform?)", path)
		}
		m = &module{path: real, ctx: ctx}
	}
	switch err := m.ctx.Initialize(); {
	case err == nil:
		m.owned = true
		m.epoch.Add(1)
	case is(err, cryptoki.CKR_CRYPTOKI_ALREADY_INITIALIZED):
	default:
		if m.refs == 0 {
			m.ctx.Destroy()
		}
		return nil, classify(fmt.Sprintf("module-path %q: initializing the PKCS#11 module", path), err)
	}
	if registry.modules == nil {
		registry.modules = map[string]*module{}
	}
	registry.modules[real] = m
	m.refs++
	return m, nil
}

// release drops one reference; the last finalizes the module (when we initialized it) and
// unloads it. A module finalized underneath us answers CKR_CRYPTOKI_NOT_INITIALIZED, which is
// no error here.
func (m *module) release() error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m.refs--
	if m.refs > 0 {
		return nil
	}
	delete(registry.modules, m.path)
	var err error
	if m.owned {
		if ferr := m.ctx.Finalize(); ferr != nil && !notInitialized(ferr) {
			err = fmt.Errorf("finalizing PKCS#11 module %q: %w", m.path, ferr)
		}
	}
	m.ctx.Destroy()
	return err
}
