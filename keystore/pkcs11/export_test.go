//go:build cgo

package pkcs11

import cryptoki "github.com/miekg/pkcs11"

// PoolSessions returns the handles of k's idle pooled sessions and how many are lent out, for
// tests that look at them from outside the key (another PKCS#11 context on the same module).
func PoolSessions(k *Key) (idle []cryptoki.SessionHandle, busy int) {
	k.pool.mu.Lock()
	defer k.pool.mu.Unlock()
	for _, s := range k.pool.idle {
		idle = append(idle, s.h)
	}
	return idle, k.pool.busy
}
