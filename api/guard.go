package api

import "net/http"

// admit is what every call passes before a handler serves it, whatever
// carried it: a unary call and the opening of a Connect stream (through the
// generationGuard interceptor), the upgrade of a framed stream (frames.go),
// and every message of a NextStream on either transport (stream.go), so that
// a stream opened before this server was fenced stops handing out values
// the moment it is. It checks the bearer token on guarded services
// (auth.go), then the generation (generation.go: learned from the caller;
// a fenced server refuses the calls that hand out values).
func (s *Server) admit(procedure string, h http.Header) error {
	if s.token != "" && s.guarded(procedure) {
		if err := s.checkToken(h.Get("Authorization")); err != nil {
			return err
		}
	}
	return generationGuard{s}.check(procedure, h)
}
