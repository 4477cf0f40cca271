"""A small table of software-vocabulary synonyms, for query expansion in the full-text half.

A query says "sign in", the memory "login"; without a model nothing bridges such words, so the
full-text query is widened with each word's group here, at the same weight. The groups come
from general programming vocabulary, not from any evaluation set: keep them modest and close.
Words are matched after the hashing embedder's stemming (`throws` finds `throw`).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["GROUPS", "synonyms", "expand_words"]

# One group per line: words that name one idea in code, docs or speech.
_TABLE = """
error exception failure fault
raise throw panic
fail failed failing unsuccessful
crash abort die
delete remove drop erase purge destroy unlink
create add insert
update modify change edit alter mutate patch
get fetch retrieve load read
find search lookup locate
save store persist write
user account member
customer client buyer purchaser subscriber
money currency cash funds
price cost fee charge rate
pay payment charge billing
invoice bill receipt statement
subscription plan tier
refund reimburse chargeback
discount coupon promo promotion voucher
tax vat gst
email mail e-mail inbox
message notification notice alert
notify alert warn inform
send deliver dispatch
retry reattempt retries
backoff delay wait sleep pause
timeout deadline
expire expiry expiration lapse ttl lifetime
renew refresh rotate renewal
time clock timestamp datetime
timezone tz utc zone
duration interval period span
day daily
week weekly
month monthly
year yearly annual
hour hourly
cache memoize memo
lock mutex semaphore latch
concurrent parallel simultaneous race
limit cap quota threshold ceiling maximum max
minimum min floor least
throttle ratelimit
config configuration setting settings option
env environment
test tests testing spec
check verify validate ensure confirm
valid legal allowed permitted
invalid malformed illegal corrupt bad
permission authorization access privilege role scope grant
admin administrator superuser root
auth authentication authenticate login logon signin credential credentials
logout signout logoff
signup register registration enroll onboarding
password passphrase passcode pin
session cookie
token jwt bearer
secret key
hash digest checksum fingerprint
encrypt encryption cipher crypto
sign signature signing hmac
database db datastore sql postgres
migration migrate schema
transaction atomic rollback
column field attribute property
row record entry
request call invocation
response reply
endpoint route url uri
server backend service
client frontend browser ui
page screen view
component widget
render display show draw
format formatting formatter
parse decode deserialize unmarshal
serialize encode marshal
payload body
header headers
queue job task worker background
schedule scheduler cron periodic recurring
start begin launch boot startup init initialize
stop halt terminate shutdown exit
run execute invoke
build compile bundle
deploy release rollout ship publish
version revision
log logging logger
metric metrics telemetry monitoring
debug troubleshoot diagnose
bug defect glitch
fix repair workaround
slow latency sluggish lag performance
fast quick speedy rapid
large big huge heavy
small tiny little
duplicate dup copy clone twice double
unique distinct dedupe deduplicate idempotent
count number total sum tally
list array collection sequence
map dict dictionary hashmap
string text str
integer int whole
decimal float fraction fractional
round rounding truncate precision
cent cents penny pennies
convert conversion transform
compare comparison equal equality
sort order ordering rank
filter exclude omit
ignore skip bypass
default fallback preset
missing absent null nil none empty
old legacy deprecated obsolete outdated stale
new latest current recent
previous prior earlier former
allow permit enable accept
deny forbid reject refuse block disallow prevent
disable deactivate
flag feature toggle
secure security safe
attack exploit vulnerability abuse
guess bruteforce brute
reset restore recover recovery
cancel revoke void
pending waiting queued
success succeed successful
decline declined denied
webhook callback hook
event signal
subscribe listen observe watch
import ingest upload
export download
file document attachment
image picture photo avatar
size length
memory ram heap
disk storage volume
network http https
tls ssl certificate cert
host hostname domain
address ip
container docker
dependency package library module
install setup
command cli script
terminal shell console
input argument parameter param arg
output result
function method procedure routine func
class type model entity
interface protocol contract
private internal hidden
public exposed external
global shared singleton
mock stub fake
fixture seed sample
dev development
prod production live
staging preprod
ci pipeline workflow
lint linter
overdue late delinquent unpaid arrears dunning
balance outstanding owed due
buy purchase order checkout
quantity qty amount
seat license licence
team organization org tenant company workspace
owner creator author
template layout
locale localization i18n translation language
combine merge mix join
split divide separate
mismatch conflict incompatible inconsistent mismatched differ
same identical
negative minus
zero nothing
exceed overflow over
reuse replay resend
once single
repeat again
loop infinite forever endless
hang freeze stuck deadlock
leak leaking
cleanup teardown dispose close release
open connect acquire
connection pool
thread goroutine coroutine
async await promise future
sync synchronous blocking
sanitize escape
inject injection
whitespace trim strip
lowercase case normalize canonical
identifier id uuid
name label title
description summary
comment docstring documentation docs
grace leeway tolerance slack skew
upgrade promote
downgrade demote
trial free
prorate proration prorated partial
navigate redirect
random nonce entropy
"""

GROUPS: tuple[tuple[str, ...], ...] = tuple(
    tuple(line.split()) for line in _TABLE.strip().splitlines() if line.strip()
)


def _key(word: str) -> str:
    from ..core.textutil import _stem

    return _stem(word.lower())


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    index: dict[str, list[str]] = {}
    for group in GROUPS:
        for word in group:
            bucket = index.setdefault(_key(word), [])
            for other in group:
                if other not in bucket:
                    bucket.append(other)
    return {k: tuple(v) for k, v in index.items()}


def synonyms(word: str) -> tuple[str, ...]:
    """The words of every group `word` belongs to (itself included); () when none."""
    return _index().get(_key(word), ())


def expand_words(words: list[str]) -> list[str]:
    """Synonyms of `words` that are not already among them (by stem), each once, in order."""
    have = {_key(w) for w in words}
    out: list[str] = []
    for word in words:
        for other in synonyms(word):
            k = _key(other)
            if k not in have:
                have.add(k)
                out.append(other)
    return out
