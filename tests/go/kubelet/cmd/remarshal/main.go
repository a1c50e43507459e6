// Command remarshal reads pods in the v1.Pod protobuf wire form and writes each back as Go writes
// it: v1.Pod.Unmarshal, then v1.Pod.Marshal, from k8s.io/api itself. What comes out is the
// reference for the bytes of any pod pods-api encodes (docs/grpc-api.md, "The pod bytes").
//
//	remarshal < pods > remarshalled
//
// Both streams are a sequence of pods, each preceded by its length as an unsigned varint (the
// protobuf "delimited" framing), in the same order. A pod that does not unmarshal is an error
// naming its index; nothing is written for the pods after it.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
)

func main() {
	if err := run(bufio.NewReader(os.Stdin), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "remarshal:", err)
		os.Exit(1)
	}
}

func run(in *bufio.Reader, stdout io.Writer) error {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	for index := 0; ; index++ {
		size, err := binary.ReadUvarint(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pod %d: reading its length: %w", index, err)
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(in, data); err != nil {
			return fmt.Errorf("pod %d: reading its %d bytes: %w", index, size, err)
		}
		var pod v1.Pod
		if err := pod.Unmarshal(data); err != nil {
			return fmt.Errorf("pod %d: v1.Pod.Unmarshal: %w", index, err)
		}
		again, err := pod.Marshal()
		if err != nil {
			return fmt.Errorf("pod %d: v1.Pod.Marshal: %w", index, err)
		}
		if _, err := out.Write(binary.AppendUvarint(nil, uint64(len(again)))); err != nil {
			return err
		}
		if _, err := out.Write(again); err != nil {
			return err
		}
	}
}
