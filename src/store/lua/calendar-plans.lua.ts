/**
 * A calendar quota's own anchor from the plans (docs/calendar-quotas.md "A customer's own
 * period"), in the evaluate driver's plans section: every evaluate script reads overrides, with
 * or without the calendar fragment.
 *
 * An override's value is a limit, or `<limit>@<anchor ms>` for a calendar policy's key with its
 * own anchor (a billing day). Lua cannot compute periods in a timezone, so the caller sends the
 * anchor its period starts were computed with after them (`<starts>|<anchor>`, '' for the
 * rule's own); when that is not the override's, the script answers {-4, policy, anchor} before
 * anything is counted, and the caller computes them again with the anchor it was told.
 */
export const CALENDAR_PLANS_LUA = `
local function cal_override(value)
  if not value then return nil, '' end
  local limit = tonumber(value)
  if limit then return limit, '' end
  local l, a = string.match(value, '^(%d+)@(%-?%d+)$')
  return tonumber(l), a or ''
end

-- The override's anchor when the policy at ARGV[b + 1..] is a calendar one whose periods were
-- computed with another ('' is a value: the rule's own anchor); nil when they agree.
local function cal_anchor_mismatch(b, anchor)
  if ARGV[b + 1] ~= 'calendar' then return nil end
  local used = string.match(ARGV[b + 3], '|(.*)$') or ''
  if used ~= anchor then return anchor end
  return nil
end
`;
