package pgtest

import (
	"fmt"
	"path/filepath"
)

// StartDir is Start for a caller without a testing.TB (the bench): it initializes a data
// directory under dir (which must exist and be empty of pgtest's files) and starts the server
// there, as Start does. The caller stops it (Stop) and removes dir.
func StartDir(dir string) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w (make test-deps installs PostgreSQL)", err)
	}
	s := &Server{Dir: dir, bin: bin, PasswordFile: filepath.Join(dir, "password")}
	if err := s.init(); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := s.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return s, nil
}

// Bin is the directory of the PostgreSQL binaries the server runs (psql, pg_isready beside
// postgres).
func (s *Server) Bin() string { return s.bin }

// PID is the postmaster's process id while the server runs (0 otherwise): its backends are
// its children.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
