package server

// SetFault makes every signing call of s call f at the decision core's fault points
// (decision.Core.SetFault): the test seam of the containment tests.
func SetFault(s *Server, f func(point, objectUID string)) { s.core.SetFault(f) }
