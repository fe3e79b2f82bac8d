package hostile

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gobwas/ws"
)

// The modes of GarbleFrames: an infer's step_ids[0] chooses how its
// action is framed, so that the client knows what it must do with it.
const (
	// framesLegal: fragments, pings and pongs between them, all as RFC
	// 6455 allows: the action must be taken.
	framesLegal = iota
	// framesRsv: a data frame with a reserved bit set (no extension was
	// negotiated; RFC 6455 5.2).
	framesRsv
	// framesMasked: a data frame masked (a server must not mask; 5.1).
	framesMasked
	// framesReservedOp: a frame of a reserved opcode (3-7, 11-15; 5.2).
	framesReservedOp
	// framesLongPing: a ping of 126 to 200 bytes (control frames carry
	// at most 125; 5.5).
	framesLongPing
	// framesFragmentedPing: a ping without FIN (control frames are not
	// fragmented; 5.5).
	framesFragmentedPing
	// framesContinuationFirst: a continuation frame before any message
	// (5.4).
	framesContinuationFirst
	// framesNewMessageInside: a binary frame where a continuation belongs
	// (5.4).
	framesNewMessageInside
	// framesText: the action in a text frame, which SPEC 7.1 makes a fatal
	// server error.
	framesText
	// framesModes counts the modes.
	framesModes
)

// framesMaxCuts bounds the fragments of one action.
const framesMaxCuts = 8

// garbleFrames returns the frames that carry payload, one message, in
// mode (a framesX constant; any other value is framesLegal), and the
// payloads of the pings among them in order. The message is cut into 1
// to 8 fragments at random points, zero-length fragments among them; up
// to two pings and unsolicited pongs of 0 to 125 bytes may precede each
// fragment (never follow the last, so a client has read every ping by
// the time it has the message). An illegal mode puts its one fault
// before the last fragment or in its header (a reserved bit or a mask
// on a data frame may fall on the last: one in three such draws), so
// that a client meets it before the message is whole. seq numbers the pings (each payload starts with it),
// so that no two on a connection are alike.
func garbleFrames(rng *rand.Rand, payload []byte, mode int64, seq *uint32) (out []byte, pings [][]byte) {
	k := 1 + rng.IntN(framesMaxCuts)
	if mode == framesNewMessageInside {
		k = max(k, 2)
	}
	cuts := make([]int, k+1)
	cuts[k] = len(payload)
	for j := 1; j < k; j++ {
		cuts[j] = rng.IntN(len(payload) + 1)
	}
	slices.Sort(cuts[1:k])

	type frame struct {
		h ws.Header
		p []byte
	}
	var frames []frame
	control := func(op ws.OpCode, p []byte) frame {
		return frame{ws.Header{Fin: true, OpCode: op, Length: int64(len(p))}, p}
	}
	data := make([]int, 0, k) // indices of the data frames in frames
	for j := 0; j < k; j++ {
		for c := rng.IntN(3); c > 0 && rng.IntN(3) == 0; c-- {
			if rng.IntN(2) == 0 {
				p := binary.BigEndian.AppendUint32(nil, *seq)
				*seq++
				p = append(p, randomBytes(rng, rng.IntN(122))...)
				frames = append(frames, control(ws.OpPing, p))
			} else {
				frames = append(frames, control(ws.OpPong, randomBytes(rng, rng.IntN(126))))
			}
		}
		op := ws.OpContinuation
		if j == 0 {
			op = ws.OpBinary
			if mode == framesText {
				op = ws.OpText
			}
		}
		p := payload[cuts[j]:cuts[j+1]]
		data = append(data, len(frames))
		frames = append(frames, frame{ws.Header{Fin: j == k-1, OpCode: op, Length: int64(len(p))}, p})
	}

	// The fault, before the last fragment (or, framesRsv and framesMasked,
	// in any data frame's header).
	insert := func(f frame) {
		at := rng.IntN(data[k-1] + 1)
		frames = append(frames[:at], append([]frame{f}, frames[at:]...)...)
	}
	switch mode {
	case framesRsv:
		f := &frames[data[rng.IntN(k)]]
		f.h.Rsv = ws.Rsv(rng.IntN(3) == 0, rng.IntN(3) == 1, rng.IntN(3) == 2)
		if f.h.Rsv == 0 {
			f.h.Rsv = ws.Rsv(true, false, false)
		}
	case framesMasked:
		f := &frames[data[rng.IntN(k)]]
		f.h.Masked = true
		binary.LittleEndian.PutUint32(f.h.Mask[:], rng.Uint32())
		f.p = bytes.Clone(f.p)
		ws.Cipher(f.p, f.h.Mask, 0)
	case framesReservedOp:
		ops := []ws.OpCode{3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf}
		p := randomBytes(rng, rng.IntN(11))
		insert(frame{ws.Header{Fin: true, OpCode: ops[rng.IntN(len(ops))], Length: int64(len(p))}, p})
	case framesLongPing:
		insert(control(ws.OpPing, randomBytes(rng, 126+rng.IntN(75))))
	case framesFragmentedPing:
		f := control(ws.OpPing, randomBytes(rng, rng.IntN(11)))
		f.h.Fin = false
		insert(f)
	case framesContinuationFirst:
		f := frame{ws.Header{Fin: rng.IntN(2) == 0, OpCode: ws.OpContinuation}, randomBytes(rng, rng.IntN(11))}
		f.h.Length = int64(len(f.p))
		frames = append([]frame{f}, frames...)
	case framesNewMessageInside:
		frames[data[1+rng.IntN(k-1)]].h.OpCode = ws.OpBinary
	}

	for _, f := range frames {
		var hb bytes.Buffer
		_ = ws.WriteHeader(&hb, f.h) // a bytes.Buffer takes any write
		out = append(append(out, hb.Bytes()...), f.p...)
		if f.h.OpCode == ws.OpPing && f.h.Fin && f.h.Length <= 125 {
			pings = append(pings, f.p)
		}
	}
	return out, pings
}

// framesAction is GarbleFrames' action for an infer of n envs: "<f4"
// values of shape [h, n, d], element k being nonce + k (exact in a float32
// while below 2^24), so that a client can check every byte it assembled.
func framesAction(h, n, d int, nonce int64) []byte {
	data := make([]byte, 0, 4*h*n*d)
	for k := 0; k < h*n*d; k++ {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(nonce+int64(k))))
	}
	return data
}
