module github.com/seqd/seqd/jepsen

go 1.26.8

require (
	connectrpc.com/connect v1.21.1
	github.com/anishathalye/porcupine v1.3.1
	github.com/seqd/seqd v0.0.0
	golang.org/x/image v0.30.0
)

require google.golang.org/protobuf v1.36.12 // indirect

replace github.com/seqd/seqd => ../
