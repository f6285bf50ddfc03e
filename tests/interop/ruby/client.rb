# Runs one Sidekiq client or API operation and prints its result as JSON on stdout.
#
#   ruby client.rb '<json command>'
#
# The command is an object with "op" and its arguments; see the case below. The tests use
# this to act as a Rails app would: push jobs, read Sidekiq::Stats, RetrySet, ProcessSet...
require "json"
require "time"
require_relative "app"

def entry_json(entry)
  {
    "jid" => entry.jid,
    "klass" => entry.klass,
    "display_class" => entry.display_class,
    "args" => entry.args,
    "display_args" => entry.display_args,
    "queue" => entry.queue,
    "score" => entry.respond_to?(:score) ? entry.score : nil,
    "at" => entry.respond_to?(:at) ? entry.at&.to_f : nil,
    "enqueued_at" => entry.enqueued_at&.to_f,
    "created_at" => entry.created_at&.to_f,
    "latency" => entry.latency,
    "error_class" => entry["error_class"],
    "error_message" => entry["error_message"],
    "retry_count" => entry["retry_count"],
    "failed_at" => entry["failed_at"],
    "retried_at" => entry["retried_at"],
    "error_backtrace" => entry.error_backtrace,
    "tags" => entry.tags,
    "value" => entry.value,
  }
end

# A job timestamp as the Web UI of this version reads it: Sidekiq 8 takes an Integer for
# milliseconds (a Float for seconds); 6.x and 7.x take any number for seconds.
def stamp_time(value)
  value.is_a?(Integer) && Sidekiq::VERSION.to_i >= 8 ? Time.at(value / 1000.0) : Time.at(value)
end

def find_entry(set_name, jid)
  set = {"retry" => Sidekiq::RetrySet, "dead" => Sidekiq::DeadSet, "schedule" => Sidekiq::ScheduledSet}.fetch(set_name).new
  set.find_job(jid) or raise "no #{jid} in #{set_name}"
end

cmd = JSON.parse(ARGV.fetch(0))
result =
  case cmd.fetch("op")
  when "push"
    item = cmd.fetch("item")
    item["class"] = Object.const_get(item["class"]) if cmd["constantize"]
    Sidekiq::Client.push(item)
  when "push_bulk"
    Sidekiq::Client.push_bulk(cmd.fetch("items"))
  when "perform_async"
    Object.const_get(cmd.fetch("class")).perform_async(*cmd.fetch("args"))
  when "perform_in"
    Object.const_get(cmd.fetch("class")).perform_in(cmd.fetch("interval"), *cmd.fetch("args"))
  when "perform_later"
    Object.const_get(cmd.fetch("class")).perform_later(*cmd.fetch("args")).job_id
  when "stats"
    s = Sidekiq::Stats.new
    {
      "processed" => s.processed, "failed" => s.failed, "enqueued" => s.enqueued,
      "scheduled_size" => s.scheduled_size, "retry_size" => s.retry_size, "dead_size" => s.dead_size,
      "processes_size" => s.processes_size, "workers_size" => s.workers_size,
      "default_queue_latency" => s.default_queue_latency, "queues" => s.queues,
    }
  when "queue"
    q = Sidekiq::Queue.new(cmd.fetch("name"))
    {"size" => q.size, "latency" => q.latency, "jobs" => q.map { |j| entry_json(j) }}
  when "set"
    set = {"retry" => Sidekiq::RetrySet, "dead" => Sidekiq::DeadSet, "schedule" => Sidekiq::ScheduledSet}.fetch(cmd.fetch("name")).new
    {"size" => set.size, "entries" => set.map { |e| entry_json(e) }}
  when "entry"
    entry = find_entry(cmd.fetch("set"), cmd.fetch("jid"))
    case cmd.fetch("action")
    when "read" then entry_json(entry)
    when "retry" then entry.retry; true
    when "kill" then entry.kill; true
    when "add_to_queue" then entry.add_to_queue; true
    when "delete" then entry.delete; true
    else raise "unknown action #{cmd["action"]}"
    end
  when "processes"
    Sidekiq::ProcessSet.new.map do |p|
      {
        "identity" => p.identity, "hostname" => p["hostname"], "pid" => p["pid"], "tag" => p["tag"],
        "concurrency" => p["concurrency"], "queues" => p["queues"], "busy" => p["busy"],
        "beat" => p["beat"], "quiet" => p["quiet"], "stopping" => p.stopping?, "labels" => p.labels,
        "started_at" => p["started_at"],
      }
    end
  when "signal"
    p = Sidekiq::ProcessSet.new.find { |x| x.identity == cmd.fetch("identity") } or raise "no process #{cmd["identity"]}"
    case cmd.fetch("signal")
    when "quiet" then p.quiet!
    when "stop" then p.stop!
    when "dump_threads" then p.dump_threads
    end
    true
  when "workers"
    Sidekiq::Workers.new.map do |process_id, thread_id, work|
      # Sidekiq 8 hands a Sidekiq::Work (readers, no []); 6.x and 7.x a Hash.
      work = {"payload" => work.payload, "queue" => work.queue, "run_at" => work.run_at.to_i} unless work.is_a?(Hash)
      payload = work["payload"]
      payload = JSON.parse(payload) if payload.is_a?(String)
      {"process_id" => process_id, "thread_id" => thread_id, "queue" => work["queue"],
       "run_at" => work["run_at"], "jid" => payload["jid"], "class" => payload["class"], "args" => payload["args"]}
    end
  when "activejob_rich"
    # What a Rails app writes for symbol-keyed hashes and keyword arguments.
    HelloJob.set(queue: cmd.fetch("queue", "mailers")).perform_later(
      "world", {count: 2, "plain" => [1, {nested: true}]}, mode: "fast", retries: 3
    ).provider_job_id
  when "entry_with_times"
    # One sorted-set entry plus its job timestamps as Ruby reads them (Time.at, as the Web UI does).
    entry = find_entry(cmd.fetch("set"), cmd.fetch("jid"))
    now = Time.now
    times = %w[created_at enqueued_at failed_at retried_at].to_h do |k|
      t = entry[k] && stamp_time(entry[k])
      [k, t && {"class" => t.class.name, "iso" => t.utc.iso8601(6), "age" => now - t}]
    end
    entry_json(entry).merge("times" => times)
  when "pushes"
    # Several client pushes in one Ruby process, in order: [{"push" => item} or {"push_bulk" => items}, ...];
    # returns each call's result (a jid, or the bulk push's jids).
    cmd.fetch("calls").map do |call|
      call.key?("push_bulk") ? Sidekiq::Client.push_bulk(call["push_bulk"]) : Sidekiq::Client.push(call.fetch("push"))
    end
  when "job_times"
    # The timestamps of several jobs as Ruby reads them: the API's created_at, enqueued_at and
    # latency, the sorted-set score as `at`, and Time.at(failed_at/retried_at) as the Web UI does.
    # Each of "jobs" is {"where" => "retry" | "dead" | "schedule" | "queue:<name>", "jid" => ...}.
    now = Time.now
    stamp = ->(t) { t && {"epoch" => t.to_f, "year" => t.utc.year, "age" => now - t} }
    cmd.fetch("jobs").map do |spec|
      where, jid = spec.fetch("where"), spec.fetch("jid")
      job = where.start_with?("queue:") ? Sidekiq::Queue.new(where.delete_prefix("queue:")).find_job(jid) : find_entry(where, jid)
      raise "no #{jid} in #{where}" unless job
      {
        "jid" => job.jid, "latency" => job.latency,
        "created_at" => stamp.call(job.created_at), "enqueued_at" => stamp.call(job.enqueued_at),
        "failed_at" => stamp.call(job["failed_at"] && Time.at(job["failed_at"])),
        "retried_at" => stamp.call(job["retried_at"] && Time.at(job["retried_at"])),
        "at" => job.respond_to?(:at) ? stamp.call(job.at) : nil,
      }
    end
  when "version"
    Sidekiq::VERSION
  when "metrics"
    # What the Metrics tab shows (Sidekiq 7+): each class's totals over the last hour, and one
    # class's histogram total.
    require "sidekiq/metrics/query"
    query = Sidekiq::Metrics::Query.new
    top = query.top_jobs(minutes: 60).job_results.to_h { |klass, r| [klass, r.totals.slice("p", "f", "ms")] }
    hist = cmd["class"] && query.for_job(cmd["class"], minutes: 60).job_results[cmd["class"]].hist.values.flatten.sum
    {"top" => top, "hist" => hist}
  when "leader"
    # Sidekiq::ProcessSet#leader: what the Busy page names as leader ("" for none).
    Sidekiq::ProcessSet.new.leader
  when "unique_digest"
    # The digests Sidekiq Enterprise computes over JSON.generate([class, queue, args]): 8.0's
    # base64 of a sha256, 7.x's hex sha1 (Ent-Changes 8.0.0); Enterprise itself is not here.
    require "digest"
    text = JSON.generate([cmd.fetch("class"), cmd.fetch("queue"), cmd.fetch("args")])
    {"enterprise8" => Digest::SHA256.base64digest(text), "enterprise7" => Digest::SHA1.hexdigest(text)}
  when "process_capsules"
    # Each process's capsules and weights as Sidekiq 7+'s API hands them to the Busy page.
    Sidekiq::ProcessSet.new.to_h do |p|
      [p.identity, {"capsules" => p["capsules"], "weights" => p["weights"], "queues" => p.queues,
                    "concurrency" => p["concurrency"], "version" => p["version"]}]
    end
  when "api_times"
    # A job's times through the API's own readers (Sidekiq 8 tells Integer milliseconds from
    # Float seconds; 7.x reads every number as seconds): epoch seconds, or nil.
    where, jid = cmd.fetch("where"), cmd.fetch("jid")
    job = where.start_with?("queue:") ? Sidekiq::Queue.new(where.delete_prefix("queue:")).find_job(jid) : find_entry(where, jid)
    raise "no #{jid} in #{where}" unless job
    failed = job.respond_to?(:failed_at) ? job.failed_at : (job["failed_at"] && Time.at(job["failed_at"]))
    {"created_at" => job.created_at&.to_f, "enqueued_at" => job.enqueued_at&.to_f, "failed_at" => failed&.to_f,
     "raw" => job.item.slice("created_at", "enqueued_at", "failed_at")}
  when "cancel_iteration"
    Sidekiq::Client.new.cancel!(cmd.fetch("jid"))
  else
    raise "unknown op #{cmd["op"]}"
  end
puts JSON.generate({"result" => result})
