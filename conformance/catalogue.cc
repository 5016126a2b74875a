// The rule catalogue: one row per rule, in RuleIdx order. docs/rules.md is generated from it.
#include <cctype>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/api/api_suite.h"
#include "conformance/internal.h"

namespace mrc::check {
namespace {

using S = Side;
using V = Severity;
constexpr bool Y = true;   // has an evaluator
constexpr bool N = false;  // catalogued only: reports not-run

constexpr std::string_view kAny = "any one point on the path";
constexpr std::string_view kReqSide = "requester's own interface(s)";
constexpr std::string_view kRspSide = "responder's own interface(s)";
constexpr std::string_view kReqOrAny = "requester's interface (best) or any point";
constexpr std::string_view kBothEnds = "requester and responder interfaces";

// clang-format off
constexpr RuleInfo kRules[] = {
  // ---------------------------------------------------------------- framing
  {"MRC-FRM-001", "The ICRC of every RoCE packet verifies, except on packets whose DSCP marks them as trimmed.",
   "IBTA", V::kError, S::kEither, kAny, "", "R1", Y,
   "frames matching an injector 'corrupt' decision within the lookahead are excused"},
  {"MRC-FRM-002", "MRC packets travel in UDP to destination port 4791; a UDP datagram that carries an MRC BTH to any other port is a violation.",
   "IBTA", V::kError, S::kEither, kAny, "", "R1", Y,
   "a datagram counts as MRC when its first payload byte is an MRC opcode and bytes 2-3 are P_Key 0xFFFF"},
  {"MRC-FRM-003", "The BTH opcode is one of the MRC opcodes 0xC6-0xCB, 0xD1, 0xD8, 0xD9, 0xDC, 0xDD, 0xDE.",
   "TP", V::kError, S::kEither, kAny, "", "R2", Y,
   "SEND/READ/ATOMIC opcodes are judged by MRC-FRM-004 instead"},
  {"MRC-FRM-004", "No SEND, READ or ATOMIC opcode (IBTA RC or their MRC-range equivalents) ever appears on an MRC QP.",
   "API", V::kError, S::kEither, kAny, "", "R2", Y, ""},
  {"MRC-FRM-005", "BTH constants: TVer 0, P_Key 0xFFFF, MigReq 0, PadCnt non-zero only on LAST/ONLY packets, SE only on *_IMM LAST/ONLY.",
   "IBTA PROP", V::kError, S::kEither, kAny, "", "R3", Y, ""},
  {"MRC-FRM-006", "IP, UDP and IB lengths agree with each other and with the bytes captured; pad fills the payload to a multiple of 4.",
   "IBTA PROP", V::kError, S::kEither, kAny, "", "R3", Y,
   "frames cut by the capture snap length are not judged"},
  {"MRC-FRM-007", "Each opcode carries exactly its header stack (METH, TSETH iff TS, RETH, ImmDt on *_IMM LAST/ONLY; SETH+CC_STATE; NETH; PETH; ERTH; EETH; AETH); only trimmed packets may end early.",
   "TP", V::kError, S::kEither, kAny, "", "R4", Y, ""},
  {"MRC-FRM-008", "Reserved bits and bytes are transmitted as zero.",
   "PROP", V::kWarning, S::kEither, kAny, "", "R5", Y, "BTH byte 4 (variant) is not judged"},
  {"MRC-FRM-009", "SRv6 framing: outer NH 41, or 43 with an SRH (NH 41, routing type 4, HdrExtLen 2*(LastEntry+1), SL <= LastEntry+1); the outer DA is in the configured locator, or (SL <= LastEntry) Segment List[SL] or a uSID shift of it.",
   "PAPER RFC", V::kError, S::kEither, kAny, "SRv6 EV format (locator check needs srv6_locator)", "R6", Y,
   "wire-format.md 10.4: a DA outside the locator is allowed only once it came from the segment list"},
  {"MRC-FRM-010", "Between two capture points the outer DA of an SRv6 packet changes only by uSID shifts, and the hop limit drops by at least the number of shifts.",
   "RFC", V::kError, S::kFabric, "two points on the same path", "SRv6 EV format", "R7", Y, ""},
  {"MRC-FRM-011", "A trimmed packet keeps at least BTH+METH+TSETH and is shorter than the original transmission of the same PSN.",
   "PAPER UET PROP", V::kError, S::kFabric, "any point after the trimming switch", "", "R34", Y,
   "the length comparison needs the untrimmed copy seen at an earlier point"},
  {"MRC-FRM-012", "In SRv6 mode the inner DA is the peer's node GID (the responder's for data and probes, the requester's for SACK, NACK and ACK), never an address inside the SRv6 locator.",
   "PAPER RFC", V::kError, S::kEither, kAny, "SRv6 EV format; node GIDs (profile nodes[].addrs[0], qps[] addresses)", "R6", Y,
   "judged when the inner DA belongs to a node the profile knows (its GID is the first of nodes[].addrs) or when srv6_locator is set"},
  {"MRC-FRM-013", "The UDP checksum is zero where allowed (IPv4; IPv6 when the profile's udp_zero_checksum is true), or verifies over the pseudo-header of the IP header carrying the datagram: in SRv6 the inner one, whose DA is the final destination.",
   "RFC PROP", V::kError, S::kEither, kAny, "udp_zero_checksum (default true)", "R1 R6", Y,
   "RFC 768, RFC 6935/6936 (zero over IPv6), RFC 8200 8.1 (final destination), wire-format.md 11.3; frames cut by the snap length and frames whose ICRC fails (MRC-FRM-001) are not judged"},
  // ---------------------------------------------------------------- entropy values
  {"MRC-EV-001", "A QP sprays: consecutive new data packets do not stay on one EV for longer than max(16, 2 x active EVs) packets while at least two EVs are usable.",
   "PAPER", V::kError, S::kRequester, kAny, "", "R8", Y,
   "runs are followed in PSN order, the send order (per-port captures stamped alike merge file by file); a run is exempt when no other active EV was usable at its time: ASSUMED_BAD or SKIP in the checker's reconstruction, or probed by the requester since its last data on it, or on a plane the responder reported down (SACK port_status, PORT_STATUS_UPDATE); min run = tolerances.spray_run_max"},
  {"MRC-EV-002", "Over a window of data packets with all ports up, the number of distinct EVs used per plane differs by at most one (plus tolerance) between planes.",
   "PAPER", V::kWarning, S::kRequester, kReqSide, "EV-to-port map (profile evs[].port)", "R9", Y,
   "windows of max(256, 16 x profile EVs) new data packets at the requester's capture; judged only in steady state: no EV ASSUMED_BAD, none dropped out of or new to the set of the window before, no port marked down, every plane in use (an unused plane reads as a port down); allowed difference 1 + tolerances.plane_balance_slack"},
  {"MRC-EV-003", "The WEV is carried as the EV format prescribes: flow label bits 19:16 zero, flow label 0 in UDP format, inner and outer flow labels equal in SRv6.",
   "API PROP", V::kError, S::kEither, kAny, "", "R10", Y, ""},
  {"MRC-EV-004", "Every data packet and reliability probe carries a WEV from the QP's EV profile.",
   "API PROP", V::kError, S::kRequester, kAny, "EV universe (profile qps[].evs)", "R10", Y, ""},
  {"MRC-EV-005", "A packet stamped with WEV w leaves on NIC port port(w).",
   "API", V::kError, S::kRequester, "requester, one capture per port", "EV-to-port map and per-port captures", "R11", Y, ""},
  {"MRC-EV-006", "Data packets never use an EV the controller DENIED.",
   "API PROP", V::kError, S::kRequester, kAny, "denied EV list (profile qps[].denied_evs)", "R12", Y, ""},
  {"MRC-EV-007", "In SRv6 mode the outer DA is the expansion of the EV named by the WEV and carries the same plane bits in every uSID.",
   "PAPER", V::kError, S::kRequester, kReqSide, "SRv6 EV expansion (profile evs[].da/segment, or evs[].compact with ev_expansion)", "R13", Y,
   "data and reliability probes at the requester's own capture; the exact DA (and SRH segment) comparison covers the plane bits of every uSID; no SRH allowed when the expansion fits 128 bits"},
  {"MRC-EV-008", "After SACK M=01 or NACK TRIMMED on EV e reaches the requester, e carries no new data until the other usable EVs have had a turn or the SKIP time passed.",
   "PAPER TP PROP", V::kError, S::kRequester, kBothEnds, "", "R39", Y,
   "a turn = tolerances.skip_rotation_fraction of the other EVs still usable (used since the signal, or active and GOOD), where any data (retransmissions too) counts as a turn; uses stamped with the same time count as possibly earlier; SKIP ends after tolerances.t_skip_ns; reaction time tolerances.reaction_ns; a violation needs proof that another EV was usable: data on an EV that was GOOD and not being probed, within the requester's next max(4, 2 x active EVs) data packets"},
  {"MRC-EV-009", "After SACK M=10, or a retransmission of a packet sent on e that was lost (no NACK or trim for it; found by the timer or by the SACK gap), e carries no data until a probe SACK (PR=1, M 00/01) for e reaches the requester.",
   "PAPER TP", V::kError, S::kRequester, kBothEnds, "", "R40", Y,
   "a timeout = a retransmission with no NACK or trim for the previous transmission and either no SACK or probe answer since it or a gap of at least the timeout T (timer tolerances) after it; a SACK-gap loss = a retransmission sooner than that after SACKs for later PSNs, with no NACK or trim for the previous transmission (PAPER section 2.1: after an untrimmed loss the sender stops using that EV); a probe answer for e after the loss decision ends the retirement, and a retransmission held T or more after SACKs for later PSNs was decided no later than the requester's first probe on e after the lost copy (it retired e on the gap; its window held the resend); exempt while usable EVs would drop below ev_min_active (default active/4); a violation needs proof that another EV was usable, as for MRC-EV-008; one report per episode"},
  {"MRC-EV-010", "An EV in ASSUMED_BAD is probed (reliability probe or EV probe on that WEV) at least once per T_probe.",
   "PAPER", V::kWarning, S::kRequester, kReqSide, "", "R41", Y, "T_probe = tolerances.t_probe_ns"},
  {"MRC-EV-011", "Replacement EVs keep the number of EVs per plane equal.",
   "PAPER", V::kWarning, S::kRequester, kReqSide, "EV-to-port map", "R42", Y,
   "a replacement is an EV that first carries new data after the first balance window (see MRC-EV-002); the next complete window without a further replacement, retirement or idle plane is judged: distinct EVs per plane differ by at most 1 + tolerances.plane_balance_slack"},
  {"MRC-EV-012", "After a port-status update or a SACK port_status marking port k of node X down, no packet toward X uses a plane-k EV until k is marked up again.",
   "PAPER PROP", V::kError, S::kRequester, kBothEnds, "EV-to-port map", "R43", Y,
   "signals count when they reach the requester: PORT_STATUS_UPDATE (ERTH mask bit N = port N), SACK with PSV=1 (bit i = port i+1); EV probe responses only mark ports up; port k of the peer is plane k; data sent more than tolerances.t_port_ns after the signal is judged, once per down episode and port"},
  {"MRC-EV-013", "A retransmission triggered by a NACK uses an EV other than the one the NACK echoed, when the QP has at least two EVs.",
   "TP", V::kError, S::kRequester, kReqOrAny, "", "R36", Y,
   "only when the NACK echoes the EV of the latest transmission before it (a NACK for an older copy is stale); a violation needs proof that another EV was usable: data on an EV that was GOOD (not SKIP or ASSUMED_BAD, not being probed) within the requester's next max(4, 2 x active EVs) data packets"},
  // ---------------------------------------------------------------- requester
  {"MRC-REQ-001", "Messages are FIRST MIDDLE* LAST(_IMM) or ONLY(_IMM) on consecutive PSNs, and the requester never skips a PSN.",
   "IBTA TP", V::kError, S::kRequester, kReqOrAny, "", "R14", Y,
   "opcode adjacency is judged order-independently; a skipped PSN needs the requester's capture and is judged only when no point saw it and no SACK covered it"},
  {"MRC-REQ-002", "Every data packet carries RETH; VA advances by PMTU per packet, R_Key and DMALen stay constant in a message, FIRST/MIDDLE carry PMTU bytes and the message ends at VA(FIRST)+DMALen.",
   "PAPER TP PROP", V::kError, S::kRequester, kAny, "PMTU (profile or inferred)", "R15", Y, ""},
  {"MRC-REQ-003", "METH.MSN is constant within a message and grows by one per message; RQMSN is constant within a message and grows by one after each WriteIMM message.",
   "PROP", V::kError, S::kRequester, kAny, "", "R16", Y, ""},
  {"MRC-REQ-004", "BTH.RTX is 1 exactly when the PSN was transmitted before.",
   "TP", V::kError, S::kRequester, kReqOrAny, "", "R17", Y,
   "RTX=1 on a never-seen PSN is judged only at the requester's capture and only beyond the highest PSN seen there"},
  {"MRC-REQ-005", "A retransmission repeats METH, RETH, ImmDt and payload of the original byte for byte.",
   "TP", V::kError, S::kRequester, kAny, "", "R17", Y, ""},
  {"MRC-REQ-006", "BTH.A is 1 on every LAST and ONLY (incl. _IMM) data packet.",
   "PROP", V::kError, S::kRequester, kAny, "", "R18", Y, ""},
  {"MRC-REQ-007", "Data DSCP: first transmissions TRIMMABLE or NO_TRIM; retransmissions TRIMMABLE_RETX, TRIMMABLE or NO_TRIM; never CONTROL.",
   "TP UET", V::kError, S::kRequester, kReqOrAny, "DSCP plan (profile dscp)", "R19", Y,
   "trimmed copies seen after a switch are judged by MRC-FRM-011 instead"},
  {"MRC-REQ-008", "A new PSN p is sent only while p - cack_seen <= MPR_eff (min(mpr, mpr_dest) x 128, or the dynamic SACK.mpr).",
   "TP PROP", V::kError, S::kRequester, kAny, "MPR (profile mpr / mpr_dest)", "R20", Y,
   "cack_seen is bounded by the highest cack in any SACK, or PSN in any transport ACK (AETH 0x1F), seen before, so a reported violation is certain"},
  {"MRC-REQ-009", "WriteIMM messages outstanding (sent, not covered by a transport ACK) never exceed the responder's max_wimm_dest.",
   "API PROP", V::kError, S::kRequester, kAny, "max_wimm_dest (profile)", "R21", Y,
   "counted from the LAST_IMM/ONLY_IMM packet (a lower bound); judged once the flow shows transport ACKs"},
  {"MRC-REQ-010", "Every data packet carries TSETH (TS=1), and ts16 never goes backwards (mod 2^16) per sending port.",
   "PROP", V::kError, S::kRequester, kReqSide, "", "R22", Y,
   "order is judged at a capture on the requester's own interface only (not one marked \"side\": \"link\": a link, an emulated one across CPUs, can reorder), and not across gaps over 4 ms (ts16 wraps every 8.4 ms)"},
  {"MRC-REQ-011", "After a NACK with code 0x01, 0x02, 0x06, 0x07, 0x0A or 0x0B for PSN p reaches the requester, p is retransmitted unless a SACK covers it first.",
   "TP", V::kError, S::kRequester, kBothEnds, "", "R36", Y,
   "judged at trace end; NACKs younger than tolerances.end_grace_ns are not judged"},
  {"MRC-REQ-012", "After NACK UNEXP_EVENT or a transport NAK reaches the requester, it sends no more data on that QP.",
   "TP", V::kError, S::kRequester, kBothEnds, "", "R37", Y, "data sent within tolerances.reaction_ns is allowed; only a NACK / NAK about a PSN the requester sent (and, for a NACK, not yet cumulatively acknowledged, on the EV of its latest transmission) counts: others are stale or spoofed, and ignoring them is right (docs/wire-format.md 8.7)"},
  {"MRC-REQ-013", "A retransmission by timeout comes no earlier than T = 1.024 us x 2^timeout after the previous transmission of that PSN.",
   "TP PROP", V::kError, S::kRequester, kReqSide, "timeout (profile)", "R44", Y,
   "only retransmissions with no NACK, SACK or probe answer since the previous transmission, both seen on the requester's own interface (not a \"side\": \"link\" capture); tolerance timer_tolerance and timer_slack_ns; a NACK that reached the requester up to reaction_ns before the previous transmission counts as since it (it may have been read after that copy left)"},
  {"MRC-REQ-014", "No PSN is retransmitted by timeout more than linear_cnt + exp_cnt times (exp_cnt 25 = unlimited).",
   "TP PROP", V::kError, S::kRequester, kAny, "retry counts (profile)", "R44", Y,
   "a retransmission counts when no NACK, SACK progress beyond the PSN or probe answer reached the requester since the previous copy and that copy was not trimmed: NACK/SACK-driven resends (a packet trimmed again and again under congestion) spend no retries (open question 7)"},
  {"MRC-REQ-015", "Every data packet the injector dropped is retransmitted, unless a SACK covers its PSN or the QP went to error.",
   "TP UET", V::kError, S::kRequester, "any point, plus the injector decision log", "injector decision log", "R36 R44", Y,
   "judged at trace end; drops younger than tolerances.end_grace_ns are not judged"},
  // ---------------------------------------------------------------- responder
  {"MRC-RSP-001", "SACK framing: BTH.PSN = cack_psn, DestQP = requester QPN, dpdcid/spdcid = requester/responder QPN[15:0], sack_offset >= 1, A = 0.",
   "TP PROP", V::kError, S::kResponder, kAny, "", "R23", Y, "QPN checks need the QPNs from the profile or from the traffic"},
  {"MRC-RSP-002", "cack_psn never decreases across the SACKs of a QP, in responder transmit order.",
   "TP UET", V::kError, S::kResponder, kRspSide, "", "R24", Y,
   "transmit order: across captures on the responder's own interfaces; per capture point at captures of its links (\"side\": \"link\": a link keeps the order its port sent in, two planes' links do not between them)"},
  {"MRC-RSP-003", "A SACK acknowledges (by cack or bitmap) only PSNs that were transmitted before it and not lost on the way.",
   "TP UET", V::kError, S::kResponder, kAny, "", "R24", Y,
   "lost = dropped per the decision log, or never seen at the responder's capture when there is one"},
  {"MRC-RSP-004", "SACK.entropy is the WEV of a transmission of the triggering PSN (cack + ack_psn_offset) seen before the SACK, or of the probe when PR=1.",
   "PAPER TP", V::kError, S::kResponder, kAny, "", "R25", Y, ""},
  {"MRC-RSP-005", "SACK.M is 00, 01 or 10; a trigger that arrived with CE gets 01 or 10, and 01 is never sent for a trigger that arrived without CE.",
   "TP PROP", V::kError, S::kResponder, kAny, "", "R26", Y,
   "'arrived without CE' needs the trigger seen at the responder's capture"},
  {"MRC-RSP-006", "A data packet that arrives with CE has its EV echoed with M=01/10 in a SACK (or NACK) within two ACK-generation windows (32 KiB of arrivals).",
   "PAPER", V::kError, S::kResponder, kAny, "", "R27", Y, "judged in the responder's order: late when it SACKs a packet that arrived through the same port more than 32 KiB after the CE packet before echoing that EV (capture times would blame a software responder's socket queue); unjudged when the trace ends within tolerances.end_grace_ns"},
  {"MRC-RSP-007", "CC_STATE is consistent: rcvd_bytes never decreases (mod 2^24) in responder order; ooo_count is at least the number of bitmap bits set.",
   "UET PROP", V::kWarning, S::kResponder, kRspSide, "", "R28", Y,
   "rcvd_bytes order as MRC-RSP-002 judges cack_psn's"},
  {"MRC-RSP-008", "SACK.mpr is 0 unless dynamic MPR is enabled on both sides, and never exceeds the negotiated responder MPR.",
   "TP", V::kError, S::kResponder, kAny, "dynamic MPR capability, mpr_dest (profile)", "R29", Y, ""},
  {"MRC-RSP-009", "A data packet with A=1 or RTX=1 that reaches the responder is answered by a SACK triggered by it (or a NACK for it) within T_ack_max.",
   "UET PROP", V::kError, S::kResponder, kRspSide, "", "R30", Y, "T_ack_max = tolerances.t_ack_max_ns; CE-only packets are judged by MRC-RSP-006, trimmed arrivals (owed a NACK) by MRC-RSP-013; a packet whose arrival port the responder reports down (SACK port_status, PORT_STATUS_UPDATE) after it arrived is excused (the answer leaves through that port); at a capture of the responder's link (\"side\": \"link\", upstream of the injector's relay for arrivals, downstream for answers) a packet is excused when the injector's log drops, after it was seen there and before its answer was due, the packet itself, a SACK of the flow that may have been triggered by it (the log names cack_psn, not ack_psn_offset), or a NACK for it"},
  {"MRC-RSP-010", "Transport ACKs carry AETH syndrome 0x1F (or NAK 0x61-0x63); their PSN never decreases and never covers a PSN that has not reached the responder.",
   "PAPER PROP", V::kError, S::kResponder, kAny, "", "R31", Y,
   "order needs the responder's capture and is judged as MRC-RSP-002's; a PSN counts as arrived as in MRC-RSP-003 (a transport ACK may run ahead of the last SACK sent)"},
  {"MRC-RSP-011", "SACK, NACK and transport ACK packets use DSCP CONTROL.",
   "TP", V::kError, S::kResponder, kAny, "DSCP plan (profile dscp)", "R32", Y, "endpoint responses are judged by MRC-PRB-006"},
  {"MRC-RSP-012", "NACK fields: code in {0x01,0x02,0x06,0x07,0x0A,0x0B,0x19}, nack_psn = BTH.PSN, DestQP = requester QPN, entropy = WEV of a transmission of that PSN.",
   "TP UET", V::kError, S::kResponder, kAny, "", "R33", Y, ""},
  {"MRC-RSP-013", "Every trimmed data packet that reaches the responder is NACKed with TRIMMED (DSCP TRIMMED) or TRIMMED_LASTHOP (DSCP TRIMMED_LASTHOP), and no SACK covers that PSN until an intact copy arrives.",
   "API UET", V::kError, S::kResponder, "any point after the trimming switch, or the decision log",
   "TRIM_NACK (profile capabilities)", "R35", Y,
   "not applicable when trim_nack=false or trim_nack_dest_unsupported=true; unjudged within end_grace_ns of the trace end"},
  {"MRC-RSP-014", "A NACK PSN_OOR_WINDOW (0x0B) names a PSN beyond the responder's window: p - cack > MPR_eff.",
   "PROP", V::kError, S::kResponder, kAny, "MPR (profile)", "R38", Y, "cack is the highest cack seen in SACKs before the NACK"},
  // ---------------------------------------------------------------- probes and endpoint ops
  {"MRC-PRB-001", "A reliability probe consumes no PSN: BTH.PSN = 0, A = 1, DestQP = responder QPN.",
   "TP PROP", V::kError, S::kRequester, kAny, "", "R45", Y, ""},
  {"MRC-PRB-002", "Each reliability probe that reaches the responder is answered by a SACK with PR=1 and ack_psn_offset = probe_id; no PR=1 SACK answers a probe never sent.",
   "TP PROP", V::kError, S::kResponder, kAny, "", "R45", Y, "unjudged within end_grace_ns of the trace end; a SACK the injector dropped after the probe arrived excuses every probe then waiting (the log does not name the probe); a missing answer is judged only with the responder's capture or an injector decision log (seen upstream only, the probe or its answer may have been lost after the capture)"},
  {"MRC-PRB-003", "Endpoint requests and responses use BTH.DestQP = 2 and PSN[23:16] = 0.",
   "TP PROP", V::kError, S::kEither, kAny, "", "R46", Y, ""},
  {"MRC-PRB-004", "Each endpoint response answers an earlier request from the node it is sent to (same req_id, same op), at most once.",
   "TP", V::kError, S::kResponder, kAny, "", "R46", Y, ""},
  {"MRC-PRB-005", "A node does not reuse a req_id while an earlier request with that id is unanswered and within its timeout.",
   "API", V::kError, S::kRequester, kAny, "", "R47", Y, "timeout = tolerances.ep_timeout_ns"},
  {"MRC-PRB-006", "Endpoint responses use DSCP CONTROL (requests may use any DSCP).",
   "TP", V::kError, S::kResponder, kAny, "DSCP plan (profile dscp)", "R48", Y, ""},
  {"MRC-PRB-007", "A QP that receives data but sends none emits EV probes on the reverse direction about once per RTT per plane.",
   "PAPER", V::kWarning, S::kResponder, kRspSide, "per-port captures at the responder", "R49", Y,
   "per responder port while data keeps arriving on it: gaps between EV probes toward the requester on that plane at most max(tolerances.t_reverse_probe_ns, 4 x the longest EV probe round trip); not judged when the responder sends data to the requester"},
  {"MRC-PRB-008", "EETH.entropy is the WEV the request arrived on, and ts_echo - ts16(request) = svc_time when SVA=1, 0 otherwise (mod 2^16).",
   "PROP", V::kError, S::kResponder, kAny, "", "R50", Y, ""},
  // ---------------------------------------------------------------- congestion control
  {"MRC-CC-001", "Bytes in flight per QP (nominal sizes of first transmissions not yet acknowledged) never exceed max_cwnd + one MTU.",
   "UET API", V::kError, S::kRequester, kAny, "max_cwnd (CC profile)", "R51", Y,
   "acknowledgement = cack/bitmap of any SACK seen, so the estimate is a lower bound of the requester's"},
  {"MRC-CC-002", "The window does not grow on SACKs with M=01 while the measured delay is at or above target_delay.",
   "UET", V::kInfo, S::kRequester, kReqSide, "CC profile base_rtt and target_delay (profile qps[].cc)", "R52", Y,
   "delay = the requester's clock at SACK arrival (its ts16, calibrated on its last data packet) - ts_echo - base_rtt, qualifying at target_delay + tolerances.reaction_ns; growth = bytes in flight (MRC-CC-001 estimate) above the high-water mark before the stretch of qualifying SACKs by more than one packet; assumes a window-limited sender, hence info"},
};
// clang-format on

static_assert(std::size(kRules) == detail::kRuleCount, "one catalogue row per RuleIdx");

std::string json_escape_md(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '|')
      o += "\\|";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "?";
}

std::string_view side_name(Side s) {
  switch (s) {
    case Side::kRequester:
      return "requester";
    case Side::kResponder:
      return "responder";
    case Side::kEither:
      return "either";
    case Side::kFabric:
      return "fabric";
  }
  return "?";
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::kPass:
      return "pass";
    case Status::kFail:
      return "fail";
    case Status::kWarn:
      return "warn";
    case Status::kNotApplicable:
      return "not-applicable";
    case Status::kNotRun:
      return "not-run";
  }
  return "?";
}

std::span<const RuleInfo> rule_catalogue() {
  return kRules;
}

const RuleInfo* find_rule(std::string_view id) {
  for (const auto& r : kRules)
    if (r.id == id) return &r;
  return nullptr;
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

void print_rules(std::ostream& out, bool json) {
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : kRules) {
      nlohmann::ordered_json j;
      j["id"] = r.id;
      j["statement"] = r.statement;
      j["source"] = split_words(r.sources);
      j["severity"] = severity_name(r.severity);
      j["side"] = side_name(r.side);
      j["capture_points"] = r.capture_points;
      j["capability"] = r.capability;
      j["refs"] = split_words(r.refs);
      j["implemented"] = r.implemented;
      j["tolerance"] = r.tolerance;
      arr.push_back(std::move(j));
    }
    out << arr.dump(2) << "\n";
    return;
  }
  for (const auto& r : kRules) {
    out << r.id << "  " << severity_name(r.severity) << "  " << side_name(r.side) << "  ["
        << r.sources << "]  " << r.refs << (r.implemented ? "" : "  (catalogued, not run)")
        << "\n    " << r.statement << "\n";
  }
}

std::string ref_anchor(std::string_view ref) {
  std::string a = "rule-sources.md#";
  for (char c : ref) a += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return a;
}

std::string ref_links(std::string_view refs) {
  std::string o;
  for (auto r : split_words(refs)) {
    if (!o.empty()) o += " ";
    o += "[" + std::string(r) + "](" + ref_anchor(r) + ")";
  }
  return o;
}

std::string rules_markdown() {
  std::ostringstream o;
  o << "# MRC conformance rules\n\n"
       "<!-- Generated from conformance/catalogue.cc by rules_markdown(); do not edit by hand.\n"
       "     Regenerate: MRC_UPDATE_GOLDEN=1 build/<dir>/conformance/mrc_check_test "
       "--gtest_filter=Catalogue.RulesMarkdownIsCurrent -->\n\n"
       "Each rule has a stable ID, a source tag, the research rule(s) it derives from (R1-R52,\n"
       "[rule-sources.md](rule-sources.md), each linked), the side it judges, the capture points "
       "it needs and the DUT\n"
       "capability or profile data it depends on. Rules marked *catalogued* have no evaluator yet\n"
       "and always report `not-run`, never `pass`.\n\n"
       "Source tags: API = OCP companion repo API; PAPER = the MRC/SRv6 paper; TP = third-party\n"
       "reconstructions of the spec; UET = Ultra Ethernet 1.0; IBTA = InfiniBand/RoCEv2; RFC = "
       "IETF;\n"
       "PROP = a choice of our MRP0 wire profile (docs/wire-format.md), to be replaced when the "
       "OCP\n"
       "text is public.\n\n"
       "Statuses in a report: `pass` (judged, no violation), `fail` (an error-level violation),\n"
       "`warn` (a warning- or info-level violation), `not-applicable` (the trace or the profile "
       "gave\n"
       "nothing to judge), `not-run` (no evaluator, or deselected).\n\n";
  // Counts by tag.
  std::map<std::string, int> by_tag;
  int implemented = 0;
  for (const auto& r : kRules) {
    for (auto t : split_words(r.sources)) by_tag[std::string(t)]++;
    implemented += r.implemented ? 1 : 0;
  }
  o << "## Summary\n\n"
    << std::size(kRules) << " rules, " << implemented << " with an evaluator, "
    << (std::size(kRules) - implemented) << " catalogued only.\n\n"
    << "| Source tag | Rules |\n|---|---|\n";
  for (const auto& [t, n] : by_tag) o << "| " << t << " | " << n << " |\n";
  o << "\n";
  const std::pair<std::string_view, std::string_view> areas[] = {
      {"MRC-FRM", "Framing"},
      {"MRC-EV", "Entropy values"},
      {"MRC-REQ", "Requester"},
      {"MRC-RSP", "Responder"},
      {"MRC-PRB", "Probes and endpoint operations"},
      {"MRC-CC", "Congestion control"}};
  for (const auto& [prefix, title] : areas) {
    o << "## " << title << "\n\n"
      << "| ID | Rule | Source | Severity | Side | Refs | Status |\n"
      << "|---|---|---|---|---|---|---|\n";
    for (const auto& r : kRules) {
      if (r.id.substr(0, prefix.size()) != prefix || r.id[prefix.size()] != '-') continue;
      o << "| " << r.id << " | " << json_escape_md(r.statement) << " | " << r.sources << " | "
        << severity_name(r.severity) << " | " << side_name(r.side) << " | " << ref_links(r.refs)
        << " | " << (r.implemented ? "evaluated" : "*catalogued*") << " |\n";
    }
    o << "\n";
    for (const auto& r : kRules) {
      if (r.id.substr(0, prefix.size()) != prefix || r.id[prefix.size()] != '-') continue;
      o << "### " << r.id << "\n\n"
        << json_escape_md(r.statement) << "\n\n"
        << "- Sources: " << r.sources << "; derived from " << ref_links(r.refs) << "\n"
        << "- Capture points: " << r.capture_points << "\n"
        << "- Depends on: " << (r.capability.empty() ? "nothing beyond the traffic" : r.capability)
        << "\n";
      if (!r.tolerance.empty()) o << "- Evaluation: " << r.tolerance << "\n";
      o << "\n";
    }
  }
  o << mrc::api::catalogue_markdown();
  return o.str();
}

}  // namespace mrc::check
