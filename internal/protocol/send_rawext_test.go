package protocol

import (
	"testing"

	"github.com/zonemq/zonemq/internal/remoting"
)

// The slots of the one-pass send header reader follow sendV2Keys.
func TestSendSlotsFollowSendV2Keys(t *testing.T) {
	for i, k := range sendV2Keys {
		if got := sendSlot(k[1]); got != i {
			t.Errorf("sendSlot(%q) = %d, want %d", k[1], got, i)
		}
	}
	if sendSlot("nope") != -1 {
		t.Error("an unknown key has a slot")
	}
}

// rawExtCommand encodes ext as a ROCKETMQ frame and decodes it as a read
// loop does, fields left in their wire form.
func rawExtCommand(t *testing.T, code RequestCode, ext map[string]string) *remoting.Command {
	t.Helper()
	req := remoting.NewRequest(int32(code), ext, []byte("body"))
	req.Serialize = remoting.SerializeRocketMQ
	frame := remoting.AppendFrame(nil, req)
	cmd, err := remoting.DecodeFrameRawExt(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cmd.RawExt(); !ok {
		t.Fatal("the fields were decoded into a map")
	}
	return cmd
}

// Reading a send header from fields in their wire form gives what SetExt
// gives from the map: the same values, defaults and errors, for both key
// sets.
func TestSendHeaderReadCommandMatchesSetExt(t *testing.T) {
	full := SendMessageRequestHeader{
		ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 8, QueueID: 3, SysFlag: 2,
		BornTimestamp: 1700000000123, Flag: -7, Properties: "UNIQ_KEY\x01abc\x02", ReconsumeTimes: 1, UnitMode: true,
		MaxReconsumeTimes: 16, Batch: true, BrokerName: "broker-a",
	}
	long := full.Ext()
	short := (&SendMessageRequestHeaderV2{SendMessageRequestHeader: full}).Ext()
	minimal := map[string]string{"producerGroup": "pg", "topic": "T", "queueId": "1", "sysFlag": "0", "bornTimestamp": "5", "flag": "0"}
	badInt := map[string]string{"producerGroup": "pg", "topic": "T", "queueId": "x", "sysFlag": "0", "bornTimestamp": "5", "flag": "0"}
	missing := map[string]string{"producerGroup": "pg", "queueId": "1", "sysFlag": "0", "bornTimestamp": "5", "flag": "0"}
	for name, ext := range map[string]map[string]string{"full": long, "minimal": minimal, "bad int": badInt, "missing topic": missing} {
		var want, got SendMessageRequestHeader
		wantErr := want.SetExt(ext)
		gotErr := got.ReadCommand(rawExtCommand(t, SendMessage, ext))
		if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
			t.Errorf("%s: error %v, want %v", name, gotErr, wantErr)
		}
		if got != want {
			t.Errorf("%s: read %+v, want %+v", name, got, want)
		}
	}
	shortMissing := map[string]string{}
	for k, v := range short {
		if k != "b" {
			shortMissing[k] = v
		}
	}
	for name, ext := range map[string]map[string]string{"V2 full": short, "V2 missing topic": shortMissing} {
		var want, got SendMessageRequestHeaderV2
		wantErr := want.SetExt(ext)
		gotErr := got.ReadCommand(rawExtCommand(t, SendMessageV2, ext))
		if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
			t.Errorf("%s: error %v, want %v", name, gotErr, wantErr)
		}
		if got != want {
			t.Errorf("%s: read %+v, want %+v", name, got, want)
		}
	}
}
