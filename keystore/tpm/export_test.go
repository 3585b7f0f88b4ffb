package tpm

// OpenSocket gives the tests this package's swtpm socket transport, which waits for its turn
// at a busy swtpm (go-tpm's linuxudstpm fails with EAGAIN, and then refuses every command).
var OpenSocket = openSocket
