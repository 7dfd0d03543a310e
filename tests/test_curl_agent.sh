#!/usr/bin/env bash
# An external agent written with nothing but curl (jq reads the JSON): it starts `rehearsal serve`,
# plays one episode of shop/refund-item-0001 to a verdict over HTTP, reporting its tokens, and checks
# that the server recorded the episode. Needs curl and jq. Exit 0: verified and recorded.
set -euo pipefail
REHEARSAL=${REHEARSAL:-rehearsal}
WORK=$(mktemp -d)
: >"$WORK/serve.log"  # created here: the background job opens its redirect only once it is scheduled
"$REHEARSAL" serve --port 0 --world shop --out "$WORK/runs" --log-level "${LOG_LEVEL:-warning}" >"$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT

URL=""
for _ in $(seq 1200); do  # up to 120 s: imports and the world load come first
  URL=$(sed -n 's/^rehearsal serve: listening on \(http:[^ ]*\) .*/\1/p' "$WORK/serve.log")
  [ -n "$URL" ] && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { echo "the server did not say where it listens" >&2; cat "$WORK/serve.log" >&2; exit 1; }
curl -sf --retry 20 --retry-connrefused --retry-delay 1 "$URL/health" | jq -e '.reward_version and .dataset.catalog_hash' >/dev/null

EPISODE=$(curl -sf -X POST "$URL/v1/episodes" -H 'content-type: application/json' \
  -d '{"world": "shop", "scenario": "refund-item-0001", "seed": 0, "agent": {"name": "curl-agent", "version": "1"}}')
ID=$(jq -r .episode_id <<<"$EPISODE")
jq -r .observation <<<"$EPISODE" | jq -e '.messages[0] | test("refund")' >/dev/null
INDEX=0

step() {  # send one action as step INDEX (a retry by curl carries the same index: never applied twice)
  local body
  body=$(jq -nc --arg action "$1" --argjson index "$INDEX" '{action: $action, step_index: $index}')
  RESPONSE=$(curl -sf --retry 3 -X POST "$URL/v1/episodes/$ID/step" -H 'content-type: application/json' -d "$body")
  INDEX=$(jq -r .step_index <<<"$RESPONSE")
}

act() {  # a tool call reporting 120 tokens; a refused call (status error) is sent once more
  local action
  action=$(jq -nc --arg tool "$1" --argjson args "$2" '{tool: $tool, args: $args, usage: {tokens: 120}}')
  step "$action"
  if [ "$(jq -r .status <<<"$RESPONSE")" = "error" ]; then step "$action"; fi
}

act find_customer '{"email": "omar.garcia518@example.com"}'
act get_order '{"order_id": 3294}'
act issue_refund '{"order_id": 3294, "amount_cents": 12599, "reason": "item arrived broken", "order_item_id": 7197}'
act finish '{"message": "I refunded 125.99 for the Mini Backpack."}'

jq -e '.terminated' <<<"$RESPONSE" >/dev/null
OUTCOME=$(jq -r .verdict.outcome <<<"$RESPONSE")
jq -e '.caveats == []' <<<"$RESPONSE" >/dev/null  # tokens were reported: efficiency is measured
curl -sf "$URL/v1/episodes/$ID" | jq -e '.state == "ended" and .ended_by == "agent"' >/dev/null

kill -TERM "$SERVER"
wait "$SERVER" || true
ls "$WORK"/runs/shop-outcome/episodes.parquet/part-*.parquet >/dev/null
echo "curl agent: episode $ID ended $OUTCOME in $INDEX steps; recorded under runs/shop-outcome/"
[ "$OUTCOME" = "verified" ]
