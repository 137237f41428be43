//! The Lua scripts that make each multi-key operation of the store atomic in Redis.

/// Checks the type of our keys before touching them, so that garbage is reported with its key.
pub(super) const LUA_WRONG: &str = r"
local function wrong(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return {'bad', key, 'a ' .. t .. ' where a ' .. want .. ' belongs'}
  end
  return nil
end
";

/// KEYS: taint, approvals, calls[, window]. ARGV: taint from, approvals from, session ttl,
/// read limit[, tool, now, cutoff, rank to trim to, window ttl].
pub(super) const LUA_PREPARE: &str = r"
local bad = wrong(KEYS[1], 'stream') or wrong(KEYS[2], 'stream') or wrong(KEYS[3], 'hash')
if not bad and KEYS[4] then bad = wrong(KEYS[4], 'zset') end
if bad then return bad end
local taint = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[4])
local approvals = redis.call('XRANGE', KEYS[2], ARGV[2], '+', 'COUNT', ARGV[4])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
if not ARGV[5] then return {'ok', taint, approvals} end
local n = redis.pcall('HINCRBY', KEYS[3], ARGV[5], 1)
if type(n) == 'table' and n.err then return {'bad', KEYS[3], n.err} end
redis.call('PEXPIRE', KEYS[3], ARGV[3])
local w = 0
if KEYS[4] then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[7])
  redis.call('ZADD', KEYS[4], ARGV[6], n)
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, ARGV[8])
  w = redis.call('ZCARD', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[9])
end
return {'ok', taint, approvals, n, w}
";

/// KEYS: taint, approvals, calls. ARGV: session ttl, taint maxlen, approvals maxlen, number of
/// taint entries, the taint entries, the approvals entries.
pub(super) const LUA_APPEND: &str = r"
local bad = wrong(KEYS[1], 'stream') or wrong(KEYS[2], 'stream')
if bad then return bad end
local k = tonumber(ARGV[4])
for i = 5, 4 + k do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'v', ARGV[i])
end
for i = 5 + k, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'v', ARGV[i])
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return {'ok'}
";

/// The Redis clock in microseconds.
pub(super) const LUA_NOW: &str = r"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
";

/// KEYS: item, index. ARGV: id, request, ttl, index member, channel.
pub(super) const LUA_PUT: &str = r"
local bad = wrong(KEYS[2], 'zset')
if bad then return bad end
local now = now_us()
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', math.floor(now / 1000)))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'request', ARGV[2], 'created', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], string.format('%.0f', math.floor(now / 1000) + ttl), ARGV[4])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
redis.call('PUBLISH', ARGV[5], 'put')
return {'ok'}
";

/// KEYS: index. ARGV: the item key prefix.
pub(super) const LUA_LIST: &str = r"
local bad = wrong(KEYS[1], 'zset')
if bad then return bad end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', math.floor(now_us() / 1000)))
local out = {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. member
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then
    redis.call('ZREM', KEYS[1], member)
  elseif t ~= 'hash' then
    return {'bad', key, 'a ' .. t .. ' where a hash belongs'}
  else
    local f = redis.call('HMGET', key, 'created', 'id', 'request', 'answer')
    if not (f[1] and f[2] and f[3]) then
      return {'bad', key, 'a pending approval without its creation time, id or request'}
    end
    if not f[4] then table.insert(out, {f[1], f[2], f[3]}) end
  end
end
return {'ok', out}
";

/// KEYS: item. ARGV: answer, channel.
pub(super) const LUA_ANSWER: &str = r"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'ok', 0} end
if t ~= 'hash' then return {'bad', KEYS[1], 'a ' .. t .. ' where a hash belongs'} end
if redis.call('HSETNX', KEYS[1], 'answer', ARGV[1]) == 0 then return {'ok', 0} end
redis.call('PUBLISH', ARGV[2], 'answer')
return {'ok', 1}
";
