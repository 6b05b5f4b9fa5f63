package wire

import (
	"testing"

	"github.com/corralhq/corral/wire/corralv1"
)

func benchMessage() *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
		Channel: "tenant1.news.eu", Epoch: "3f2a9c", Offset: 123456789,
		Priority: corralv1.Priority_PRIORITY_P1, Data: make([]byte, 256), TimeUnixMs: 1_800_000_000_000,
	}}}
}

func benchPublish() *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Id: 77, Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
		Channel: "ingest.telemetry", Priority: corralv1.Priority_PRIORITY_P2, Data: make([]byte, 256), ClientMessageId: "m-000123",
	}}}
}

func BenchmarkEncodeMessage(b *testing.B) {
	for _, format := range []Format{FormatProto, FormatJSON} {
		b.Run(format.String(), func(b *testing.B) {
			c := mustCodec(b, format, Config{})
			m := benchMessage()
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				buf, err = c.AppendServerFrame(buf[:0], m)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkDecodeMessage(b *testing.B) {
	for _, format := range []Format{FormatProto, FormatJSON} {
		b.Run(format.String(), func(b *testing.B) {
			c := mustCodec(b, format, Config{})
			data, err := c.AppendServerFrame(nil, benchMessage())
			if err != nil {
				b.Fatal(err)
			}
			var f corralv1.ServerFrame
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.DecodeServerFrame(data, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeCheckPublish(b *testing.B) {
	for _, format := range []Format{FormatProto, FormatJSON} {
		b.Run(format.String(), func(b *testing.B) {
			c := mustCodec(b, format, Config{})
			data, err := c.AppendClientFrame(nil, benchPublish())
			if err != nil {
				b.Fatal(err)
			}
			var f corralv1.ClientFrame
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.DecodeClientFrame(data, &f); err != nil {
					b.Fatal(err)
				}
				if err := c.CheckClientFrame(&f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
