package resp

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// limitListener hands out connections that bound the bytes read between
// two commands: redcon's reader grows its buffer until a command is
// complete, so a client sending one endless bulk string (or an endless
// inline line) would otherwise take all memory.
type limitListener struct {
	net.Listener
	max int
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitConn{Conn: c, max: l.max}, nil
}

// limitConn counts the bytes read since the last complete command
// (commandRead) and fails the read, after telling the client why, once they
// pass max.
type limitConn struct {
	net.Conn
	max  int
	read atomic.Int64
}

// commandRead says that a command was complete: what is read from now on
// belongs to the next.
func (c *limitConn) commandRead() { c.read.Store(0) }

func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.read.Add(int64(n)) > int64(c.max) {
		c.writeNow(fmt.Sprintf("ERR Protocol error: a command larger than %d bytes", c.max))
		return 0, fmt.Errorf("resp: a command larger than %d bytes", c.max)
	}
	return n, err
}

// writeNow writes an error reply straight to the connection, bypassing
// redcon's buffer (which is empty: it is flushed after every read's
// commands), within a second.
func (c *limitConn) writeNow(msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("-" + msg + "\r\n"))
}
