package api

import "github.com/seqd/seqd/flake/holder"

// GranterOf is the granter s gives its own holders (tests only).
func GranterOf(s *Server) holder.Granter { return granter{s} }
