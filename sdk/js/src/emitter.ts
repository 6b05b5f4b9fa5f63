// emitter.ts: a small typed event emitter. A listener that throws does not
// break the client: the exception is rethrown asynchronously, where the
// browser reports it.

export type Listener<T> = (event: T) => void;

export class Emitter<Events extends object> {
  private readonly listeners = new Map<keyof Events, Set<Listener<never>>>();

  /** on adds a listener and returns the function that removes it. */
  on<K extends keyof Events>(name: K, fn: Listener<Events[K]>): () => void {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(fn as Listener<never>);
    return () => this.off(name, fn);
  }

  /** off removes a listener. */
  off<K extends keyof Events>(name: K, fn: Listener<Events[K]>): void {
    this.listeners.get(name)?.delete(fn as Listener<never>);
  }

  protected emit<K extends keyof Events>(name: K, event: Events[K]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        (fn as Listener<Events[K]>)(event);
      } catch (e) {
        setTimeout(() => {
          throw e;
        }, 0);
      }
    }
  }
}
