// Package tpm is the keystore backend of CA keys inside a TPM 2.0: the private key is made by
// the TPM and never leaves it, and every signature is a TPM2_Sign. It speaks the go-tpm tpm2
// command API to a TPM device (the kernel's /dev/tpmrm0 by default) or to swtpm's unix socket.
//
// # URIs
//
//	tpm-uri   = "tpm:" [ key ] [ "?" attribute *( "&" attribute ) ]
//	key       = "handle=" persistent-handle / "blob=" path
//	attribute = "device=" path / "socket=" path
//
//	tpm:handle=0x81000100                          persistent key, on /dev/tpmrm0
//	tpm:blob=/var/lib/signet/ca.tpmkey             key blob file, on /dev/tpmrm0
//	tpm:handle=0x81000100?device=/dev/tpm0         another TPM device
//	tpm:blob=/etc/signet/ca.tpmkey?socket=/run/swtpm/sock   swtpm's server socket
//	tpm:?socket=/run/swtpm/sock                    the TPM alone (List)
//
// persistent-handle is hexadecimal with a 0x prefix, 0x81000000 to 0x81FFFFFF (Generate makes
// keys in the owner's range, up to 0x817FFFFF). Values are percent-decoded ("%3F" in a path is
// "?", and in the query "+" is a space, so escape it as "%2B"). device= names a TPM character
// device; socket= names a unix socket serving raw TPM 2.0 commands, as
// `swtpm socket --tpm2 --server type=unixio,path=…` does (not the Microsoft simulator's TCP
// protocol). At most one of them may be given, and with neither the device is /dev/tpmrm0.
// Unknown, repeated and empty attributes are refused by name. The canonical form, which
// Generate and List return, writes the handle as 0x%08x, a blob path absolute, and no device=
// for the default device.
//
// # Keys
//
// A handle= key is a persistent object of the owner hierarchy. A blob= key is a file holding
// the key's public area and its private area sealed by the storage root key (SRK), in the
// "TSS2 PRIVATE KEY" PEM format of draft-bottomley-tpm2-keys, which the openssl tpm2 provider,
// tpm2-tss-engine and the Linux kernel read: the ASN.1 TPMKey sequence of the loadable-key OID
// 2.23.133.10.1.3, emptyAuth TRUE, parent TPM_RH_OWNER (0x40000001), and the marshalled
// TPM2B_PUBLIC and TPM2B_PRIVATE. A blob made by those tools loads if its parent is the owner
// hierarchy's ECC SRK or a persistent key, and it has no policy. The file must be readable by
// its owner only (chmod 600), like a PEM CA key.
//
// The SRK is the ECC P-256 storage key of the TCG provisioning guidance, created with
// TPM2_CreatePrimary in the owner hierarchy with the empty unique field the openssl tpm2
// provider uses. It is derived from the owner seed, so it is the same key every time until the
// TPM is cleared; Open and Generate create it, use it as the parent and flush it. The owner
// hierarchy must have the empty password.
//
// Keys have an empty password and no policy: the TPM binds the key to this machine, and
// whoever can reach the TPM (the device's permissions, the socket's) and, for a blob, read the
// file, can sign with it. Authorization values and policies (PCRs, for example) are future
// work. Generate creates unrestricted signing keys (sign, fixedTPM, fixedParent,
// sensitiveDataOrigin, userWithAuth, noDA; no decrypt) with the TPM_ALG_NULL scheme, so each
// signature chooses its scheme: P-256, P-384, RSA-2048 and RSA-3072 (which a TPM may lack:
// the go-tpm-tools simulator does; swtpm has it).
//
// # Signing
//
// ECC keys sign ECDSA with the hash the caller names (SHA-256, SHA-384 or SHA-512, the digest
// of that length) and return ASN.1 DER; RSA keys sign RSASSA PKCS #1 v1.5, or RSAPSS when the
// options are *rsa.PSSOptions. The TPM chooses the PSS salt length: the hash's length on the
// simulator, swtpm and TPMs following the current specification (what x509.CreateCertificate
// asks for); a TPM that uses another length fails a request for a length it did not use, with
// an error saying so. TPM2_Sign gets the null ticket (an unrestricted key needs no proof that
// the TPM hashed the message). Each signature is verified with the public key before it is
// returned. A Key serializes its TPM commands on its own connection; several keys may be open
// at once.
//
// A blob key stays loaded while the Key is open and is flushed by Close. Without a resource
// manager (a swtpm socket, /dev/tpm0) a TPM holds only a few loaded objects (three on swtpm and
// the simulator, one of which Open needs for the SRK), so few blob keys can be open at once
// there; /dev/tpmrm0 swaps them. If the TPM restarts, the next Sign finds the transient handle
// gone (or holding another key: the signature does not verify) and loads the blob again, once.
//
// # Errors
//
// Errors name the part of the URI at fault (device=, socket=, blob=, handle=) or the
// algorithm. Failures of the device wrap keyerr.ErrUnavailable, so that keystore re-opens the
// key: a socket or device that is missing or refuses connections, EOF, a broken pipe, a busy
// device, a closed key, TPM_RC_RETRY, YIELDED, TESTING, INITIALIZE and the like, a key gone
// from its handle after a restart, and a signature that does not verify. Errors a retry
// cannot fix (a missing or corrupt blob, an empty handle, an unsupported key) do not wrap it.
// Recovery loops and timeouts are keystore's; a socket command still gives up after two
// minutes so that a hung swtpm cannot hold a key's lock forever. The package does not log.
package tpm
