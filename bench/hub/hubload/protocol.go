package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/corralhq/corral/wire/corralv1"
)

// protocol is what a session says after the upgrade, for either dialer:
// the payloads of its two requests (Hello or connect, then Subscribe) and
// how it recognises the server's answer to each.
type protocol struct {
	op        byte // the opcode of the client's frames: 2 binary, 1 text
	hello     func(token string) []byte
	subscribe func(channel string) []byte
	// reply reports whether the server frame (op, p) answers request
	// step (1: Hello, 2: Subscribe), or the error it carries.
	reply func(step int, op byte, p []byte) (bool, error)
}

func protocolOf(srv server) protocol {
	switch {
	case srv.centrifugo && srv.protobuf:
		return centrifugoProto
	case srv.centrifugo:
		return centrifugoJSON
	}
	return corralProto
}

var corralProto = protocol{
	op: 2,
	hello: func(token string) []byte {
		b, _ := codec.AppendClientFrame(nil, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: token, Priority: corralv1.Priority_PRIORITY_P2}}})
		return b
	},
	subscribe: func(channel string) []byte {
		b, _ := codec.AppendClientFrame(nil, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: channel}}})
		return b
	},
	reply: func(step int, op byte, p []byte) (bool, error) {
		if op != 2 {
			return false, fmt.Errorf("opcode %d: %q", op, p)
		}
		var f corralv1.ServerFrame
		if err := codec.DecodeServerFrame(p, &f); err != nil {
			return false, err
		}
		if e := f.GetError(); e != nil {
			return false, fmt.Errorf("error %d %s", e.GetCode(), e.GetText())
		}
		if step == 1 {
			return f.GetWelcome() != nil, nil
		}
		return f.GetSubscribed() != nil, nil
	},
}

// centrifugoJSON is Centrifugo's JSON protocol: replies are JSON objects,
// one a line, several lines to a frame.
var centrifugoJSON = protocol{
	op: 1,
	hello: func(token string) []byte {
		tok, _ := json.Marshal(token)
		return []byte(`{"id":1,"connect":{"token":` + string(tok) + `}}`)
	},
	subscribe: func(channel string) []byte {
		ch, _ := json.Marshal(channel)
		return []byte(`{"id":2,"subscribe":{"channel":` + string(ch) + `}}`)
	},
	reply: func(step int, op byte, p []byte) (bool, error) {
		if op == 8 {
			return false, fmt.Errorf("closed: %q", p)
		}
		for _, line := range bytes.Split(p, []byte("\n")) {
			var r struct {
				ID    int `json:"id"`
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &r) != nil || r.ID != step {
				continue
			}
			if r.Error != nil {
				return false, fmt.Errorf("error %d %s", r.Error.Code, r.Error.Message)
			}
			return true, nil
		}
		return false, nil
	},
}

// centrifugoProto is Centrifugo's protobuf protocol: each frame holds
// commands (replies) as varint-length-prefixed messages; Command has id =
// 1, connect = 4 (ConnectRequest token = 1), subscribe = 5
// (SubscribeRequest channel = 1); Reply has id = 1 and error = 2 (Error
// code = 1, message = 2). The request ids are the steps.
var centrifugoProto = protocol{
	op:        2,
	hello:     func(token string) []byte { return cfCommand(1, 4, cfString1(token)) },
	subscribe: func(channel string) []byte { return cfCommand(2, 5, cfString1(channel)) },
	reply: func(step int, op byte, p []byte) (bool, error) {
		if op == 8 {
			return false, fmt.Errorf("closed: %q", p)
		}
		for len(p) > 0 {
			msg, n := protowire.ConsumeBytes(p)
			if n < 0 {
				return false, errors.New("bad reply framing")
			}
			p = p[n:]
			var rid uint64
			var rerr []byte
			for len(msg) > 0 {
				num, typ, n := protowire.ConsumeTag(msg)
				if n < 0 {
					return false, errors.New("bad reply")
				}
				msg = msg[n:]
				switch {
				case num == 1 && typ == protowire.VarintType:
					rid, n = protowire.ConsumeVarint(msg)
				case num == 2 && typ == protowire.BytesType:
					rerr, n = protowire.ConsumeBytes(msg)
				default:
					n = protowire.ConsumeFieldValue(num, typ, msg)
				}
				if n < 0 {
					return false, errors.New("bad reply")
				}
				msg = msg[n:]
			}
			if rid != uint64(step) {
				continue
			}
			if rerr != nil {
				return false, fmt.Errorf("error %x", rerr)
			}
			return true, nil
		}
		return false, nil
	},
}

func cfCommand(id uint32, field protowire.Number, inner []byte) []byte {
	var cmd []byte
	cmd = protowire.AppendTag(cmd, 1, protowire.VarintType)
	cmd = protowire.AppendVarint(cmd, uint64(id))
	cmd = protowire.AppendTag(cmd, field, protowire.BytesType)
	cmd = protowire.AppendBytes(cmd, inner)
	return protowire.AppendBytes(nil, cmd)
}

func cfString1(v string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, v)
}
