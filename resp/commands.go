package resp

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/seqd/seqd"
)

// redisVersion is the Redis version HELLO and INFO claim: the protocol
// level seqd's subset follows (RESP3, HELLO, CLIENT SETINFO), so that
// clients speak it to seqd as they do to Redis 7.
const redisVersion = "7.0.0"

// supported lists the commands seqd speaks, for the refusal of every other
// one and for COMMAND: name, arity (Redis's: negative means at least).
var supported = []struct {
	name  string
	arity int
	flags []string
}{
	{"incr", 2, []string{"write", "fast"}},
	{"incrby", 3, []string{"write", "fast"}},
	{"get", 2, []string{"readonly", "fast"}},
	{"mget", -2, []string{"readonly", "fast"}},
	{"ping", -1, []string{"fast"}},
	{"echo", 2, []string{"fast"}},
	{"hello", -1, []string{"noauth", "fast"}},
	{"auth", -2, []string{"noauth", "fast"}},
	{"client", -2, []string{"fast"}},
	{"select", 2, []string{"fast"}},
	{"command", -1, nil},
	{"info", -1, nil},
	{"quit", -1, []string{"noauth", "fast"}},
}

const supportedList = "INCR, INCRBY, GET, MGET, PING, ECHO, HELLO, AUTH, CLIENT, SELECT, COMMAND, INFO, QUIT"

// command runs one command that is not part of a run (exec.go). It
// reports whether the connection is to close (QUIT).
func (s *Server) command(c redcon.Conn, st *connState, name string, args [][]byte) (quit bool) {
	switch name {
	case "QUIT":
		c.WriteString("OK")
		c.Close()
		return true
	case "AUTH":
		s.auth(c, st, args)
		return false
	case "HELLO":
		s.hello(c, st, args)
		return false
	}
	if !st.authed {
		c.WriteError("NOAUTH Authentication required.")
		return false
	}
	switch name {
	case "INCRBY":
		s.incrBy(c, st, args)
	case "PING":
		switch len(args) {
		case 1:
			c.WriteString("PONG")
		case 2:
			c.WriteBulk(args[1])
		default:
			c.WriteError(wrongArgs(name))
		}
	case "ECHO":
		if len(args) != 2 {
			c.WriteError(wrongArgs(name))
			return false
		}
		c.WriteBulk(args[1])
	case "SELECT":
		if len(args) != 2 {
			c.WriteError(wrongArgs(name))
		} else if string(args[1]) != "0" {
			c.WriteError("ERR DB index is out of range (seqd has database 0 only; spaces are key prefixes)")
		} else {
			c.WriteString("OK")
		}
	case "CLIENT":
		s.client(c, st, args)
	case "COMMAND":
		s.commandInfo(c, st, args)
	case "INFO":
		s.infoReply(c, args)
	case "CLUSTER":
		// Redis's own text: cluster-aware clients (rueidis) then fall back
		// to one node.
		c.WriteError("ERR This instance has cluster support disabled")
	default:
		c.WriteError(fmt.Sprintf("ERR unknown command '%s': seqd speaks %s (see docs/redis.md)", oneLine(trim(args[0])), supportedList))
	}
	return false
}

func trim(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// parseKey parses "[space:]key" (see the package doc). It returns an error
// reply for a malformed key.
func parseKey(arg []byte, spaces *spaceCache) (key, string) {
	k := key{space: seqd.DefaultSpaceName} // "5" and "default:5" are one key
	num := arg
	if i := bytes.LastIndexByte(arg, ':'); i >= 0 {
		num = arg[i+1:]
		name, err := spaces.name(arg[:i])
		if err != nil {
			return k, "ERR key '" + oneLine(trim(arg)) + "': the part before the last ':' names the space: " + oneLine(err.Error())
		}
		k.space = name
	}
	v, ok := parseDecimal(num)
	if !ok {
		return k, "ERR key '" + oneLine(trim(arg)) + "' is not [space:]N with N a decimal integer from 0 to 18446744073709551615"
	}
	k.key = v
	return k, ""
}

// parseDecimal parses b, decimal digits only, as a uint64.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if c < '0' || c > '9' || v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// spaceCache is a connection's last space of a key (seqd.ForeignName's
// answer): a client names one space, or a few, over and over.
type spaceCache struct {
	raw   []byte
	space string
}

// name is seqd.ForeignName of raw.
func (c *spaceCache) name(raw []byte) (string, error) {
	if c != nil && c.raw != nil && bytes.Equal(raw, c.raw) {
		return c.space, nil
	}
	name, err := seqd.ForeignName(string(raw))
	if err == nil && c != nil {
		c.raw, c.space = append(c.raw[:0], raw...), name
	}
	return name, err
}

func (s *Server) incrBy(c redcon.Conn, st *connState, args [][]byte) {
	if len(args) != 3 {
		c.WriteError(wrongArgs("INCRBY"))
		return
	}
	k, msg := parseKey(args[1], &st.spaces)
	if msg != "" {
		c.WriteError(msg)
		return
	}
	n, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil || n < 1 || n > seqd.MaxReserveCount {
		c.WriteError(fmt.Sprintf("ERR INCRBY takes an increment from 1 to %d (seqd never decreases a sequence)", seqd.MaxReserveCount))
		return
	}
	first, err := s.cfg.Backend.Reserve(st.ctx, k.space, k.key, uint64(n))
	if err != nil {
		c.WriteError(errorReply(err))
		return
	}
	c.WriteUint64(first + uint64(n) - 1)
}

// auth serves AUTH password and AUTH username password (any username).
func (s *Server) auth(c redcon.Conn, st *connState, args [][]byte) {
	if len(args) != 2 && len(args) != 3 {
		c.WriteError(wrongArgs("AUTH"))
		return
	}
	if s.cfg.Token == "" {
		c.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	if !s.checkToken(args[len(args)-1]) {
		c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	st.authed = true
	c.WriteString("OK")
}

// hello serves HELLO [protover [AUTH username password] [SETNAME name]].
func (s *Server) hello(c redcon.Conn, st *connState, args [][]byte) {
	proto := st.proto
	if len(args) > 1 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			c.WriteError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.WriteError("NOPROTO unsupported protocol version")
			return
		}
		proto = v
	}
	var name []byte
	setName := false
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "AUTH":
			if i+2 >= len(args) {
				c.WriteError("ERR Syntax error in HELLO option 'auth'")
				return
			}
			if s.cfg.Token != "" {
				if !s.checkToken(args[i+2]) {
					c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
					return
				}
				st.authed = true
			}
			i += 2
		case "SETNAME":
			if i+1 >= len(args) {
				c.WriteError("ERR Syntax error in HELLO option 'setname'")
				return
			}
			name, setName = args[i+1], true
			i++
		default:
			c.WriteError("ERR Syntax error in HELLO option '" + oneLine(trim(args[i])) + "'")
			return
		}
	}
	if !st.authed {
		c.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	st.proto = proto
	if setName {
		st.name = string(name)
	}
	inf := s.info()
	fields := []struct {
		k string
		v any
	}{
		{"server", "redis"}, {"version", redisVersion}, {"proto", proto}, {"id", st.id},
		{"mode", "standalone"}, {"role", "master"}, {"modules", nil},
		{"seqd_version", inf.Version},
	}
	if proto == 3 {
		c.WriteRaw([]byte("%" + strconv.Itoa(len(fields)) + "\r\n"))
	} else {
		c.WriteArray(2 * len(fields))
	}
	for _, f := range fields {
		c.WriteBulkString(f.k)
		switch v := f.v.(type) {
		case string:
			c.WriteBulkString(v)
		case int:
			c.WriteInt(v)
		case int64:
			c.WriteInt64(v)
		default:
			c.WriteArray(0)
		}
	}
}

// client serves the CLIENT subcommands stock clients send when they
// connect.
func (s *Server) client(c redcon.Conn, st *connState, args [][]byte) {
	if len(args) < 2 {
		c.WriteError(wrongArgs("CLIENT"))
		return
	}
	switch sub := strings.ToUpper(string(args[1])); sub {
	case "SETNAME":
		if len(args) != 3 {
			c.WriteError(wrongArgs("CLIENT|SETNAME"))
			return
		}
		st.name = string(args[2])
		c.WriteString("OK")
	case "GETNAME":
		if st.name == "" {
			s.writeNull(c, st)
		} else {
			c.WriteBulkString(st.name)
		}
	case "ID":
		c.WriteInt64(st.id)
	case "SETINFO", "NO-EVICT", "NO-TOUCH":
		c.WriteString("OK")
	case "TRACKING":
		// Accepted so that clients with client-side caching on by default
		// (rueidis) connect; nothing is ever tracked, and CLIENT CACHING,
		// which a cached read needs, is refused: no read is ever served
		// from a client's cache.
		c.WriteString("OK")
	default:
		c.WriteError("ERR CLIENT " + oneLine(trim(args[1])) + " is not supported by seqd (it accepts SETNAME, GETNAME, ID, SETINFO, TRACKING, NO-EVICT, NO-TOUCH; client-side caching (CLIENT CACHING) is not supported)")
	}
}

func (s *Server) writeNull(c redcon.Conn, st *connState) {
	if st.proto == 3 {
		c.WriteRaw([]byte("_\r\n"))
	} else {
		c.WriteNull()
	}
}

// commandInfo serves COMMAND, COMMAND COUNT, COMMAND LIST, COMMAND INFO and
// COMMAND DOCS (empty: redis-cli then uses its own help).
func (s *Server) commandInfo(c redcon.Conn, st *connState, args [][]byte) {
	entry := func(i int) {
		cmd := supported[i]
		c.WriteArray(6)
		c.WriteBulkString(cmd.name)
		c.WriteInt(cmd.arity)
		c.WriteArray(len(cmd.flags))
		for _, f := range cmd.flags {
			c.WriteString(f)
		}
		first, last := 0, 0
		switch cmd.name {
		case "incr", "incrby", "get":
			first, last = 1, 1
		case "mget":
			first, last = 1, -1
		}
		step := 0
		if first > 0 {
			step = 1
		}
		c.WriteInt(first)
		c.WriteInt(last)
		c.WriteInt(step)
	}
	if len(args) == 1 {
		c.WriteArray(len(supported))
		for i := range supported {
			entry(i)
		}
		return
	}
	switch strings.ToUpper(string(args[1])) {
	case "COUNT":
		c.WriteInt(len(supported))
	case "LIST":
		c.WriteArray(len(supported))
		for _, cmd := range supported {
			c.WriteBulkString(cmd.name)
		}
	case "INFO":
		c.WriteArray(len(args) - 2)
		for _, a := range args[2:] {
			found := -1
			for i, cmd := range supported {
				if strings.EqualFold(cmd.name, string(a)) {
					found = i
				}
			}
			if found < 0 {
				s.writeNull(c, st)
			} else {
				entry(found)
			}
		}
	case "DOCS":
		if st.proto == 3 {
			c.WriteRaw([]byte("%0\r\n"))
		} else {
			c.WriteArray(0)
		}
	default:
		c.WriteError("ERR COMMAND " + oneLine(trim(args[1])) + " is not supported by seqd (it answers COMMAND, COUNT, LIST, INFO, DOCS)")
	}
}

// infoReply serves INFO [section ...]: the sections server, clients,
// replication and seqd.
func (s *Server) infoReply(c redcon.Conn, args [][]byte) {
	inf := s.info()
	leads := make([]string, len(inf.Leads))
	for i, g := range inf.Leads {
		leads[i] = strconv.Itoa(g)
	}
	sections := []struct {
		name  string
		lines []string
	}{
		{"server", []string{"redis_version:" + redisVersion, "redis_mode:standalone", "seqd_version:" + inf.Version,
			"tcp_port:" + portOf(s.Addr().String())}},
		{"clients", []string{"connected_clients:" + strconv.FormatInt(s.conns.Load(), 10)}},
		{"replication", []string{"role:master", "connected_slaves:0"}},
		{"seqd", []string{"seqd_node_id:" + inf.NodeID, "seqd_cluster_id:" + inf.ClusterID,
			"seqd_groups:" + strconv.Itoa(inf.Groups), "seqd_leads_groups:" + strings.Join(leads, ",")}},
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var b strings.Builder
	for _, sec := range sections {
		if !all && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(sec.name[:1]) + sec.name[1:] + "\r\n")
		for _, l := range sec.lines {
			b.WriteString(l + "\r\n")
		}
	}
	c.WriteBulkString(b.String())
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return ""
}
